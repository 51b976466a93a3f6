//! `--check-config`, as strict as `nginx -t`: everything a start needs is checked (without
//! starting, and without leaving anything behind), and every problem is told, not just the first.

use anyhow::{Result, bail};

use crate::config::Reading;

/// Prints the configuration as it would be used and every problem with it: its values, unknown
/// keys, paths that cannot be written, a Redis and Kafka brokers that do not answer. Fails if there is any.
pub async fn run(reading: Reading) -> Result<()> {
    let Reading { config, errors } = reading;
    for warning in &config.warnings {
        println!("warning: {warning}");
    }
    let values_fine = errors.is_empty();
    // Unknown keys are only warned about when serving (the original ignored them), but here a
    // typo must not pass for a setting.
    let mut problems = errors;
    problems.extend(config.unknown.iter().cloned());
    problems.extend(config.path_problems());
    if values_fine {
        println!("; {} as delayer reads it\n{config}", config.file.display());
        match crate::redis_version(&config).await {
            Ok(version) => println!(
                "Redis at {} answers (redis_version {version})",
                config.redis.address()
            ),
            Err(error) => problems.push(format!("{error:#}")),
        }
        if let Some(kafka) = &config.kafka {
            // A CA file that cannot be read is told above, once.
            #[cfg(feature = "kafka")]
            if kafka
                .security
                .ca_file
                .as_ref()
                .is_some_and(|path| std::fs::File::open(path).is_err())
            {
                println!("the Kafka brokers are not tried until ssl_ca_file can be read");
            } else {
                match crate::kafka::brokers_answer(kafka).await {
                    Ok(answer) => println!("{answer}"),
                    Err(error) => problems.push(format!("{error:#}")),
                }
            }
            #[cfg(not(feature = "kafka"))]
            problems.push(format!(
                "{}: [kafka] brokers = {}: this delayer was built without Kafka (the cargo \
                 feature kafka)",
                config.file.display(),
                kafka.brokers
            ));
        }
    } else {
        println!("Redis is not tried until the values below are right");
    }
    if problems.is_empty() {
        println!("configuration {} is OK", config.file.display());
        return Ok(());
    }
    for problem in &problems {
        eprintln!("error: {problem}");
    }
    bail!(
        "configuration {} has {} problem{}",
        config.file.display(),
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    )
}
