//! `notevault device`: the reference device client's subcommands.

use crate::cli::DeviceCommand;

/// The reference device client; secrets come from flags or the environment (clap) and
/// are never printed, but the recovery key `init --recovery` makes, once.
pub fn device(command: DeviceCommand) -> anyhow::Result<()> {
    use crate::device;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        match command {
            DeviceCommand::Init(a) => {
                let d = a.device;
                let recovery = device::init(
                    &d.dir,
                    &a.server,
                    &a.device_id,
                    d.token,
                    d.passphrase.as_deref(),
                    a.recovery,
                )
                .await?;
                if let Some(key) = recovery {
                    println!("recovery key (shown once; keep it offline): {key}");
                }
                eprintln!("notevault: {} is a device of {}", d.dir.display(), a.server);
            }
            DeviceCommand::Pull(d) => {
                let n = device::pull(&d.dir, d.token, d.passphrase.as_deref()).await?;
                eprintln!("notevault: pulled {n} ops");
            }
            DeviceCommand::Push(d) => {
                let report = device::push(&d.dir, d.token, d.passphrase.as_deref()).await?;
                for (file, copy) in &report.conflicts {
                    eprintln!("notevault: {file}: changed here and on the daemon; your version is kept as {copy}");
                }
                for (file, id) in &report.pending {
                    eprintln!("notevault: {file}: queued for review as pending write {id}, not applied yet (a pull brings it once a reviewer approves it)");
                }
                for r in &report.refused {
                    eprintln!("notevault: {}: not pushed: {}", r.local, r.text);
                }
                eprintln!(
                    "notevault: pushed {} changes, {} kept as conflicted copies, {} pending review, {} refused",
                    report.applied,
                    report.conflicts.len(),
                    report.pending.len(),
                    report.refused.len()
                );
                if !report.settled() {
                    anyhow::bail!("not every change is on the daemon yet (see above)");
                }
            }
            DeviceCommand::Passphrase(a) => {
                let d = a.device;
                device::passphrase(
                    &d.dir,
                    d.token,
                    d.passphrase.as_deref(),
                    a.recovery_key.as_deref(),
                    &a.new_passphrase,
                )
                .await?;
                eprintln!("notevault: the data key is wrapped under the new passphrase");
            }
            DeviceCommand::RotateKey(a) => {
                let d = a.device;
                let done = device::rotate_key(
                    &d.dir,
                    d.token,
                    d.passphrase.as_deref(),
                    a.recovery_key.as_deref(),
                )
                .await?;
                eprintln!(
                    "notevault: the data key is keyVersion {}; {} private notes sealed again, the old key dropped",
                    done.key_version, done.sealed
                );
            }
        }
        Ok(())
    })
}
