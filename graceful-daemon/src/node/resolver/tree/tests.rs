use super::*;

#[test]
fn parents_come_before_children() {
    let root = std::env::temp_dir().join(format!("graceful-tree-{}", std::process::id()));
    std::fs::create_dir_all(root.join("a/b/c")).unwrap();
    std::fs::create_dir_all(root.join("d")).unwrap();
    std::fs::write(root.join("a/file"), b"").unwrap();
    let mut seen = Vec::new();
    walk(&root, Path::new("/"), |d, rel, _| {
        assert_eq!(d, abs(&root, rel));
        seen.push(rel.to_path_buf());
        true
    });
    std::fs::remove_dir_all(&root).unwrap();
    let pos = |p: &str| seen.iter().position(|s| s == Path::new(p)).unwrap();
    assert_eq!(seen.len(), 5, "{seen:?}");
    assert!(pos("/") < pos("/a") && pos("/a") < pos("/a/b") && pos("/a/b") < pos("/a/b/c"));
}
