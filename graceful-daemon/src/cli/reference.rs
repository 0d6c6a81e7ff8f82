//! The CLI's own documentation, generated from its clap definitions so it
//! cannot drift: `graceful completions <shell>` and the reference in
//! `docs/cli.md` (`cargo xtask docs` writes it; a test checks it is current).

use clap::CommandFactory;

use super::Cli;

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    pub shell: clap_complete::Shell,
}

/// `graceful completions <shell>`: the script on stdout.
///
/// ```sh
/// graceful completions bash > /etc/bash_completion.d/graceful
/// graceful completions zsh > "${fpath[1]}/_graceful"
/// graceful completions fish > ~/.config/fish/completions/graceful.fish
/// ```
pub fn completions(args: CompletionsArgs) -> anyhow::Result<i32> {
    let mut cmd = Cli::command();
    clap_complete::generate(args.shell, &mut cmd, "graceful", &mut std::io::stdout());
    Ok(0)
}

/// The reference shows which variables a flag reads, never the values this
/// shell happens to have.
fn without_env_values(cmd: clap::Command) -> clap::Command {
    let names: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_string()).collect();
    let mut cmd = cmd.mut_args(|a| a.hide_env_values(true));
    for n in names {
        cmd = cmd.mut_subcommand(n, without_env_values);
    }
    cmd
}

/// The whole reference as Markdown: every visible command's full help.
pub fn markdown() -> String {
    let mut root = without_env_values(Cli::command().bin_name("graceful"));
    root.build();
    let mut out = String::from(
        "# `graceful` command reference\n\n\
         Generated from the CLI's own definitions by `cargo xtask docs`; \
         a test fails when it is out of date. Every command also answers `--help`.\n\n",
    );
    let mut sections = vec![("graceful".to_string(), root.clone())];
    for sub in root
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        sections.push((format!("graceful {}", sub.get_name()), sub.clone()));
    }
    out.push_str("| command | what |\n|---|---|\n");
    for (name, cmd) in sections.iter().skip(1) {
        let about = cmd.get_about().map(|a| a.to_string()).unwrap_or_default();
        let anchor = name.replace(' ', "-");
        out.push_str(&format!("| [`{name}`](#{anchor}) | {about} |\n"));
    }
    for (name, mut cmd) in sections {
        let help = cmd.render_long_help().to_string();
        let help: Vec<&str> = help.lines().map(str::trim_end).collect();
        out.push_str(&format!(
            "\n## {name}\n\n```text\n{}\n```\n",
            help.join("\n").trim_end()
        ));
    }
    out
}

#[cfg(test)]
mod tests;
