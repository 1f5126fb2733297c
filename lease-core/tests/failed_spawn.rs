//! The renewer where the runtime's spawn fails, tried from two threads at once: a caller that
//! drives the renewer (`run_renewer`) while an acquisition on another thread is still trying
//! to spawn it must run the loop once that spawn fails, not leave it to a task that never ran.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use common::tokio_memory;
use futures::future::BoxFuture;
use lease_core::{LeaseClient, LeaseGuard, Runtime, Ttl};

/// A runtime on tokio's clock whose spawn fails; the first spawn tells `entered` and then waits
/// until `open` says to go on, as a slow runtime's refusal does.
#[derive(Debug, Clone)]
struct SlowRefusal {
    first: Arc<AtomicBool>,
    entered: Arc<Mutex<mpsc::Sender<()>>>,
    open: Arc<Mutex<mpsc::Receiver<()>>>,
}

impl Runtime for SlowRefusal {
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }

    fn now(&self) -> std::time::Instant {
        tokio::time::Instant::now().into_std()
    }

    fn spawn(&self, task: BoxFuture<'static, ()>) -> Result<(), BoxFuture<'static, ()>> {
        if self.first.swap(false, Ordering::SeqCst) {
            self.entered.lock().unwrap().send(()).unwrap();
            // Bounded: a test that never opens the gate fails instead of hanging.
            let _ = self
                .open
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(10));
        }
        Err(task)
    }
}

/// The acquisition's spawn is tried first and refused slowly; `run_renewer`, polled on another
/// thread meanwhile, must renew the lease once the refusal comes. Before, it read the flag the
/// acquisition had set for its spawn, took the loop for spawned and waited for ever, and the
/// lease lapsed at its deadline with nothing renewing it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewer_driven_while_a_spawn_is_refused_renews() {
    let (entered, entered_rx) = mpsc::channel();
    let (open_tx, open) = mpsc::channel();
    let runtime = SlowRefusal {
        first: Arc::new(AtomicBool::new(true)),
        entered: Arc::new(Mutex::new(entered)),
        open: Arc::new(Mutex::new(open)),
    };
    let client = LeaseClient::builder(tokio_memory(), runtime)
        .ttl(Ttl::from_secs(1).unwrap())
        .renew_every(Duration::from_millis(250))
        .safety_margin(Duration::from_millis(100))
        .build()
        .unwrap();
    // The acquisition, on a thread of its own, tries to spawn the renewer and waits in `spawn`.
    let acquiring = std::thread::spawn({
        let client = client.clone();
        move || -> LeaseGuard {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap();
            runtime
                .block_on(client.try_acquire("sweep"))
                .unwrap()
                .expect("a fresh lease")
        }
    });
    entered_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the acquisition never tried to spawn the renewer");
    // The renewer is driven here meanwhile, on the test's runtime: once its first poll has
    // begun (which reads whether the loop is spawned at once), the spawn is refused.
    let (polled_tx, polled) = tokio::sync::oneshot::channel();
    let driving = tokio::spawn({
        let client = client.clone();
        async move {
            let _ = polled_tx.send(());
            client.run_renewer().await
        }
    });
    tokio::time::timeout(Duration::from_secs(10), polled)
        .await
        .expect("the renewer's driver was never polled")
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    open_tx.send(()).unwrap();
    let guard = tokio::task::spawn_blocking(move || acquiring.join().unwrap())
        .await
        .unwrap();
    // Three TTLs: a lease nobody renews is lost at its 900 ms deadline.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        guard.is_held(),
        "the lease lapsed: nothing renewed it while `run_renewer` was polled"
    );
    driving.abort();
}
