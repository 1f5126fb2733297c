//! `leasectl watch`: the list again at every interval, until interrupted or after a count.

use std::io::IsTerminal;
use std::time::Duration;

use lease_core::{DynLeaseStore, ErrorChain};

use crate::Failure;
use crate::args::Output;
use crate::{json, render};

/// Lists every `interval`, `count` times or until Ctrl-C. Each round prints the list (text: the
/// screen cleared first on a terminal, else a blank line between rounds; JSON: one document a
/// line), or its error on standard error; the answer is the last round's (a failure when
/// interrupted before the first answered), or a failure to write the list (a reader that went
/// away ends the watch as the last round answered).
pub(crate) async fn run(
    store: &DynLeaseStore,
    table: &str,
    interval: Duration,
    count: Option<u64>,
    output: Output,
) -> Result<(), Failure> {
    let terminal = std::io::stdout().is_terminal();
    // The handler is set when this is first polled: each `select!` below polls it first
    // (`biased`), so it is set before the first listing goes out. Polled second, a listing
    // that answered at once left it unpolled, and a Ctrl-C after that listing ended the
    // process by the signal's default action, not cleanly.
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    // Interrupted before any list answered, the watch showed nothing: not a success.
    let mut last = Err(Failure::Failed(format!(
        "interrupted before the leases in table {table} were listed"
    )));
    let mut round = 0u64;
    loop {
        round += 1;
        let listed = tokio::select! {
            biased;
            _ = &mut interrupted => return last,
            listed = tokio::time::timeout(crate::store::ANSWER_TIMEOUT, store.list()) => listed,
        };
        let text = match listed {
            Ok(Ok(leases)) => {
                last = Ok(());
                Some(match output {
                    Output::Text => render::list(&leases, table),
                    Output::Json => json::list(&leases, table),
                })
            }
            Ok(Err(error)) => {
                let message = format!(
                    "cannot list the leases in table {table}: {}",
                    ErrorChain(&error)
                );
                crate::say(&message);
                last = Err(Failure::Reported);
                None
            }
            Err(_) => {
                let message =
                    crate::no_answer_text(&format!("cannot list the leases in table {table}"));
                crate::say(&message);
                last = Err(Failure::Reported);
                None
            }
        };
        if let Some(text) = text {
            let prefix = match output {
                Output::Text if terminal => "\x1b[2J\x1b[H",
                Output::Text if round > 1 => "\n",
                _ => "",
            };
            // A closed pipe (`leasectl watch | head`) ends the watch, as the last round
            // answered; any other error writing (a full disk) fails it.
            if !crate::write_out(&format!("{prefix}{text}"))? {
                return last;
            }
        }
        if count.is_some_and(|count| round >= count) {
            return last;
        }
        tokio::select! {
            biased;
            _ = &mut interrupted => return last,
            () = tokio::time::sleep(interval) => {}
        }
    }
}
