//! The azure-init 0.1.1 flow, made only of libazureinit's own public functions.

use std::panic::{AssertUnwindSafe, catch_unwind};

use libazureinit::{goalstate, imds};

use crate::exit;

/// Runs the flow on a current-thread runtime and returns the exit status.
pub fn ready(with_imds: bool) -> u8 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("libazureinit-adapter: cannot start the async runtime: {e}");
            return exit::NOT_REPORTED;
        }
    };
    runtime.block_on(ready_flow(with_imds))
}

async fn ready_flow(with_imds: bool) -> u8 {
    if with_imds {
        // azure-init 0.1.1 queried IMDS first and stopped (no report) when that failed.
        let body = match imds::query_imds().await {
            Ok(body) => body,
            Err(e) => {
                eprintln!("imds::query_imds failed: {e}; no report sent (as azure-init 0.1.1)");
                return exit::NOT_REPORTED;
            }
        };
        if let Err(why) = read_instance(body) {
            eprintln!("{why}; no report sent (as azure-init 0.1.1)");
            return exit::NOT_REPORTED;
        }
    }

    let goal_state = match goalstate::get_goalstate().await {
        Ok(goal_state) => goal_state,
        Err(e) => {
            eprintln!("goalstate::get_goalstate failed: {e}; no report sent");
            return exit::NOT_REPORTED;
        }
    };
    eprintln!("goal state: {goal_state:?}");

    match goalstate::report_health(goal_state).await {
        Ok(()) => {
            eprintln!("goalstate::report_health: Ready accepted");
            exit::REPORTED
        }
        Err(e) => {
            eprintln!("goalstate::report_health failed: {e}");
            exit::NOT_REPORTED
        }
    }
}

/// The library's IMDS readers, as the binary called them. They `expect()` on missing fields;
/// a panic there is the library's answer to that document, reported as "not reported".
fn read_instance(body: String) -> Result<(), String> {
    let read = catch_unwind(AssertUnwindSafe(|| -> Result<String, String> {
        let e = |what: &str, err: Box<dyn std::error::Error>| format!("imds::{what} failed: {err}");
        let username = imds::get_username(body.clone()).map_err(|err| e("get_username", err))?;
        let hostname = imds::get_hostname(body.clone()).map_err(|err| e("get_hostname", err))?;
        let keys = imds::get_ssh_keys(body.clone()).map_err(|err| e("get_ssh_keys", err))?;
        let password_disabled = imds::get_provision_with_password(&body)
            .map_err(|err| e("get_provision_with_password", err))?;
        Ok(format!(
            "imds: adminUsername={username} computerName={hostname} publicKeys={} \
             disablePasswordAuthentication={password_disabled}",
            keys.len()
        ))
    }));
    match read {
        Ok(Ok(summary)) => {
            eprintln!("{summary}");
            Ok(())
        }
        Ok(Err(why)) => Err(why),
        Err(_) => Err("libazureinit 0.1.1 panicked reading the IMDS document".to_owned()),
    }
}
