use super::*;

#[test]
fn docs_cli_md_is_current() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/cli.md");
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == markdown(),
        "{} is out of date: run `cargo xtask docs`",
        path.display()
    );
}

#[test]
fn every_command_has_a_section_and_completions_name_them() {
    let md = markdown();
    for sub in [
        "daemon",
        "cgroups",
        "pods",
        "pod",
        "drains",
        "doctor",
        "uninstall",
        "completions",
    ] {
        assert!(md.contains(&format!("\n## graceful {sub}\n")), "{sub}");
    }
    let mut cmd = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, "graceful", &mut script);
    let script = String::from_utf8(script).unwrap();
    assert!(
        script.contains("drains") && script.contains("--api-socket"),
        "{script}"
    );
}
