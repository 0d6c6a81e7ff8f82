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

/// `apt-cache policy qemu-utils` with bookworm-backports enabled and
/// qemu-utils 10.0 installed from there.
const POLICY: &str = "qemu-utils:
  Installed: 1:10.0.2+ds-2+deb13u1~bpo12+1
  Candidate: 1:10.0.2+ds-2+deb13u1~bpo12+1
  Version table:
 *** 1:10.0.2+ds-2+deb13u1~bpo12+1 100
        100 http://deb.debian.org/debian bookworm-backports/main amd64 Packages
        100 /var/lib/dpkg/status
     1:7.2+dfsg-7+deb12u18+b3 500
        500 http://deb.debian.org/debian bookworm/main amd64 Packages
     1:7.2+dfsg-7+deb12u15 500
        500 http://deb.debian.org/debian-security bookworm-security/main amd64 Packages
";

#[test]
fn the_suite_an_installed_version_came_from() {
    assert_eq!(
        suite_of(POLICY, "1:10.0.2+ds-2+deb13u1~bpo12+1").as_deref(),
        Some("bookworm-backports")
    );
    assert_eq!(
        suite_of(POLICY, "1:7.2+dfsg-7+deb12u15").as_deref(),
        Some("bookworm-security")
    );
    // Backports not in the sources: dpkg's status is the only origin.
    let alone = "qemu-utils:
  Installed: 1:10.0.2+ds-2+deb13u1~bpo12+1
  Candidate: 1:10.0.2+ds-2+deb13u1~bpo12+1
  Version table:
 *** 1:10.0.2+ds-2+deb13u1~bpo12+1 100
        100 /var/lib/dpkg/status
     1:7.2+dfsg-7+deb12u18+b3 500
        500 http://deb.debian.org/debian bookworm/main amd64 Packages
";
    assert_eq!(suite_of(alone, "1:10.0.2+ds-2+deb13u1~bpo12+1"), None);
}
