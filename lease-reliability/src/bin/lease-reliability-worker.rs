//! The worker process of the multi-process scenarios; see `lease_reliability::worker`.
#![forbid(unsafe_code)]

use lease_reliability::db::Db;
use lease_reliability::worker::{self, Args};
use lease_reliability::{Driver, with_driver};

fn main() {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(error) => fail(&error),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let result = runtime.block_on(async {
        let db = Db::parse(args.get("db")?).ok_or("db= must be postgres, mariadb or sqlite")?;
        let driver = Driver::parse(args.get("driver")?).ok_or("driver= must be sqlx or diesel")?;
        match args.get("mode")? {
            "pause" => with_driver!(driver, db, |factory| worker::pause(factory, &args).await),
            "history" => {
                with_driver!(driver, db, |factory| worker::history(factory, &args).await)
            }
            "fenced" => {
                with_driver!(driver, db, |factory| worker::fenced(factory, &args).await)
            }
            other => Err(format!("unknown mode={other}").into()),
        }
    });
    if let Err(error) = result {
        fail(&error.to_string());
    }
}

fn fail(message: &str) -> ! {
    eprintln!("lease-reliability-worker: {message}");
    std::process::exit(2);
}
