use super::*;

#[test]
fn this_machine_has_cgroup2_and_ids_match_inodes() {
    let h = Hierarchy::discover().unwrap();
    let root_id = h.id_of("/").unwrap();
    assert_eq!(h.walk().get(&root_id).map(String::as_str), Some("/"));
}
