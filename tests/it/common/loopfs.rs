//! A small ext4 file system on a loop device, for the storage tests (root only): made,
//! mounted, aborted, checked; unmounted and detached when dropped, also on a failure.
#![allow(
    clippy::disallowed_methods,
    reason = "tests play the operator: they make, mount and check a file system"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Run a command; its success and its output (stdout then stderr).
pub fn run(program: &str, args: &[&str]) -> (bool, String) {
    match Command::new(program).args(args).output() {
        Ok(out) => (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        ),
        Err(e) => (false, e.to_string()),
    }
}

/// Why this machine cannot run the test, if it cannot.
pub fn unsupported() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    if !Path::new("/dev/loop-control").exists() {
        return Some("no loop devices".into());
    }
    for tool in ["mkfs.ext4", "e2fsck", "losetup", "mount", "umount", "git"] {
        if Command::new(tool).arg("-V").output().is_err() {
            return Some(format!("{tool} is missing"));
        }
    }
    None
}

/// A file system image attached to a loop device and mounted; unmounted and detached
/// when dropped (also when the test fails), after the daemon it holds is killed.
pub struct LoopFs {
    image: PathBuf,
    pub mount: PathBuf,
    pub device: String,
    mounted: bool,
    pub daemon: Option<super::Daemon>,
}

impl LoopFs {
    /// An ext4 image of `mib` MiB under `dir`, attached and mounted at `dir/mnt`.
    pub fn new(dir: &Path, mib: u64) -> Self {
        let image = dir.join("fs.img");
        std::fs::File::create(&image)
            .unwrap()
            .set_len(mib << 20)
            .unwrap();
        let (ok, out) = run(
            "mkfs.ext4",
            &["-q", "-F", "-b", "4096", image.to_str().unwrap()],
        );
        assert!(ok, "mkfs.ext4: {out}");
        let (ok, out) = run("losetup", &["-f", "--show", image.to_str().unwrap()]);
        assert!(ok, "losetup: {out}");
        let mount = dir.join("mnt");
        std::fs::create_dir_all(&mount).unwrap();
        let mut fs = Self {
            image,
            mount,
            device: out.trim().to_string(),
            mounted: false,
            daemon: None,
        };
        fs.mount();
        fs
    }

    pub fn mount(&mut self) {
        let (ok, out) = run(
            "mount",
            &[
                "-o",
                "errors=remount-ro",
                &self.device,
                self.mount.to_str().unwrap(),
            ],
        );
        assert!(ok, "mount: {out}");
        self.mounted = true;
    }

    pub fn unmount(&mut self) {
        let (ok, out) = run("umount", &[self.mount.to_str().unwrap()]);
        assert!(ok, "umount: {out}");
        self.mounted = false;
    }

    /// Abort the file system as ext4 does on an error: the journal stops, what is not
    /// on disk is lost.
    pub fn trigger_error(&self) {
        let name = Path::new(&self.device).file_name().unwrap();
        let trigger = Path::new("/sys/fs/ext4")
            .join(name)
            .join("trigger_fs_error");
        std::fs::write(&trigger, "notevault storage fault test").unwrap();
    }

    /// Fill the file system (as root: its reserved blocks too) with `name`, to the last
    /// block it gives; remove the file to free the space again.
    pub fn fill(&self, name: &str) -> PathBuf {
        fill(&self.mount, name)
    }

    /// Stop the daemon as a service manager does (SIGTERM), and wait for it.
    pub fn stop_daemon(&mut self) {
        if let Some(mut daemon) = self.daemon.take() {
            // SAFETY: signalling a child process of ours by its id.
            unsafe { libc::kill(daemon.child.id() as i32, libc::SIGTERM) };
            let _ = daemon.child.wait();
        }
    }

    pub fn kill_daemon(&mut self) {
        // Dropped: killed and waited for.
        self.daemon.take();
    }
}

/// Fill the file system holding `dir` with the file `name` in it, to the last block it
/// gives; remove the file to free the space again.
pub fn fill(dir: &Path, name: &str) -> PathBuf {
    use std::io::Write;
    let path = dir.join(name);
    let mut file = std::fs::File::create(&path).unwrap();
    for size in [1 << 20, 4096, 512] {
        let chunk = vec![0u8; size];
        while file.write_all(&chunk).and_then(|()| file.flush()).is_ok() {}
        // A write that failed part way may have left data in the page cache that
        // cannot be allocated: sync what can be.
        let _ = file.sync_all();
    }
    path
}

/// A tmpfs of a few MiB mounted on a directory (root only): a second file system that
/// fills on its own. Unmounted when dropped; drop the daemon using it first.
pub struct Tmpfs {
    pub mount: PathBuf,
}

impl Tmpfs {
    pub fn new(at: &Path, mib: u64) -> Self {
        std::fs::create_dir_all(at).unwrap();
        let size = format!("size={mib}m");
        let (ok, out) = run(
            "mount",
            &["-t", "tmpfs", "-o", &size, "tmpfs", at.to_str().unwrap()],
        );
        assert!(ok, "mount tmpfs: {out}");
        Self {
            mount: at.to_path_buf(),
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        if !run("umount", &[self.mount.to_str().unwrap()]).0 {
            run("umount", &["-l", self.mount.to_str().unwrap()]);
        }
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        self.kill_daemon();
        if self.mounted && !run("umount", &[self.mount.to_str().unwrap()]).0 {
            run("umount", &["-l", self.mount.to_str().unwrap()]);
        }
        run("losetup", &["-d", &self.device]);
        let _ = std::fs::remove_file(&self.image);
    }
}
