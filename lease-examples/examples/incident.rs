//! The incident of the design story, reproduced: one instance with a pool of four connections
//! holds its four jobs with session advisory locks, and its readiness write times out; with
//! leases it keeps serving. Needs PostgreSQL.
//!
//! ```sh
//! cargo run --example incident -- postgres://postgres@127.0.0.1:5432/test
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/test cargo run --example incident
//! ```

use std::process::ExitCode;

use lease_examples::incident;

#[tokio::main]
async fn main() -> ExitCode {
    let url = match incident::database_url(
        std::env::args().skip(1),
        std::env::var(incident::URL_VAR).ok(),
    ) {
        Ok(url) => url,
        Err(usage) => {
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    };
    match incident::run(&url).await {
        Ok(report) => {
            println!("{report}");
            if report.reproduced() {
                ExitCode::SUCCESS
            } else {
                eprintln!("the incident did not reproduce as the story tells it");
                ExitCode::FAILURE
            }
        }
        Err(error) => {
            eprintln!(
                "incident example failed: {}",
                lease_core::ErrorChain(&*error)
            );
            ExitCode::FAILURE
        }
    }
}
