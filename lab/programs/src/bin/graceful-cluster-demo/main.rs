//! `graceful-cluster-demo`: a rolling update on the test node, its drains
//! shown as they happen ([`demo`]). `cargo xtask demo --cluster` brings the
//! node up and runs it.

mod demo;

fn main() -> anyhow::Result<()> {
    demo::run(&graceful_tests::cluster::Cluster::get())
}
