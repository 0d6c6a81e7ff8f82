use std::time::Duration;

use super::*;

#[tokio::test]
async fn a_task_that_ends_is_named_with_how_it_ended() {
    let mut tasks = Tasks::default();
    tasks.spawn("forever", std::future::pending());
    tasks.spawn("returns", async {});
    let (name, how) = tasks.ended().await;
    assert_eq!(name, "returns");
    assert!(how.is_ok());

    tasks.spawn("panics", async { panic!("on purpose") });
    let (name, how) = tasks.ended().await;
    assert_eq!(name, "panics");
    assert!(how.unwrap_err().is_panic());
    // Only the endless one is left: it stops when asked, and nothing else
    // ends before.
    assert!(
        tokio::time::timeout(Duration::from_millis(100), tasks.ended())
            .await
            .is_err(),
        "only the endless task is left"
    );
    assert!(tasks.shutdown(Duration::from_secs(1)).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_stops_every_task_and_names_one_past_its_bound() {
    let mut tasks = Tasks::default();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tasks.spawn("waits", async move {
        let _ = rx.await;
    });
    // A task blocking its thread cannot be aborted at an await point: the
    // bound is what stops the agent from hanging on it.
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    tasks.spawn("blocks", async move {
        let _ = started_tx.send(());
        std::thread::sleep(Duration::from_millis(600));
    });
    started_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    let started = std::time::Instant::now();
    let left = tasks.shutdown(Duration::from_millis(100)).await;
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(left, ["blocks"]);
    assert!(
        tx.is_closed(),
        "the waiting task was stopped, its receiver dropped"
    );
}
