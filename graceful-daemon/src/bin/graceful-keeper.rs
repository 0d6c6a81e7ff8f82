//! `graceful-keeper`: the keeper alone (see `graceful::continuity::keeper`).
//! `graceful daemon --keeper on` execs it; it runs that same command as the
//! agent, its child. A binary of its own, so that the process that stays
//! up beside the agent maps only the keeper's code.

fn main() {
    std::process::exit(graceful::continuity::keeper::alone::main())
}
