use std::sync::{Arc, Mutex, RwLock};

use super::*;

#[test]
fn a_poisoned_lock_still_gives_its_data() {
    let m = Arc::new(Mutex::new(1));
    let l = Arc::new(RwLock::new(2));
    let (m2, l2) = (m.clone(), l.clone());
    let _ = std::thread::spawn(move || {
        let _g = m2.lock().unwrap();
        let _w = l2.write().unwrap();
        panic!("poison both");
    })
    .join();
    assert!(m.is_poisoned() && l.is_poisoned());
    *lock(&m) += 1;
    *write(&l) += 1;
    assert_eq!((*lock(&m), *read(&l)), (2, 3));
}
