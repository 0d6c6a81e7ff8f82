//! `graceful-cluster-demo`: `cargo xtask demo --cluster` runs it on the
//! test node; see `graceful_tests::cluster::demo`.

fn main() -> anyhow::Result<()> {
    graceful_tests::cluster::demo::run(&graceful_tests::cluster::Cluster::get())
}
