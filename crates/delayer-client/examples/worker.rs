//! A worker for the topic `order.close`, and a few jobs for it.
//!
//! With a Redis and the delayer daemon running (`scripts/run` starts both):
//!
//! ```sh
//! cargo run -p delayer-client --example worker              # Redis at 127.0.0.1:6379
//! REDIS_URL=redis://:secret@10.0.0.5:6379/2 cargo run -p delayer-client --example worker
//! ```
//!
//! It pushes five jobs due one to five seconds from now, then handles them as they fall due (the
//! third fails once and is retried). Ctrl-C stops it gracefully.

use std::process::ExitCode;
use std::time::Duration;

use delayer_client::{Client, Job, Worker};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/0".into());
    match run(&url).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error} (Redis at {url}; set REDIS_URL to use another)");
            ExitCode::FAILURE
        }
    }
}

async fn run(url: &str) -> delayer_client::Result<()> {
    let client = Client::connect(url).await?;

    for order in 1..=5 {
        let id = client
            .push("order.close", format!("order {order}"))
            .delay(Duration::from_secs(order))
            .await?;
        println!("pushed order {order} as job {id}, due in {order} s");
    }

    Worker::new(client)
        .concurrency(4)
        .ttr(Duration::from_secs(30))
        .retry_backoff(Duration::from_secs(1), Duration::from_secs(60))
        .handle("order.close", close_order)
        .run(async {
            tokio::signal::ctrl_c().await.ok();
            println!("stopping: running handlers finish, nothing is lost");
        })
        .await
}

/// Closes an order if still unpaid. An `Err` has the job tried again after a backoff (the Worker
/// logs it through `tracing`, which this example does not set up: it prints it itself).
async fn close_order(job: Job) -> Result<(), String> {
    let order = job.body_text().map_err(|error| error.to_string())?;
    if order == "order 3" && job.attempts == 1 {
        let failure = format!("{order}: payment service unavailable");
        println!(
            "failed {failure} (job {}, attempt {}): tried again in 1 s",
            job.id, job.attempts
        );
        return Err(failure);
    }
    println!("closed {order} (job {}, attempt {})", job.id, job.attempts);
    Ok(())
}
