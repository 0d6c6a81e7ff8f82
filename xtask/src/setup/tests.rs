use super::*;

#[test]
fn finds_the_real_libllvm_and_its_major() {
    let dir = std::env::temp_dir().join(format!("xtask-llvm-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("libLLVM-22-rust-1.97.0-nightly.so"),
        "INPUT(libLLVM.so.22.1-rust-1.97.0-nightly)\n",
    )
    .unwrap();
    fs::write(
        dir.join("libLLVM.so.22.1-rust-1.97.0-nightly"),
        vec![0u8; 2 << 20],
    )
    .unwrap();
    fs::write(dir.join("librustc_driver-x.so"), vec![0u8; 3 << 20]).unwrap();
    let (real, major) = find_libllvm(&dir).unwrap();
    assert_eq!(real.file_name().unwrap(), "libLLVM.so.22.1-rust-1.97.0-nightly");
    assert_eq!(major, "22");
    fs::remove_dir_all(&dir).unwrap();
}
