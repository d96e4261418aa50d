//! The wall where bubblewrap cannot run (user namespaces refused by AppArmor's
//! `restrict_unprivileged_userns`, `max_user_namespaces = 0`, a container): the seal alone
//! ([`super::seal`]) under the worker's keeper ([`super::keeper`]).
//!
//! | it | how |
//! |---|---|
//! | reads the system, not the owners' homes, `/tmp`, `/run`, executor's workspace or other worktrees | Landlock: read rights beneath every top folder but those, descending around them |
//! | writes its worktree, its private home (its `TMPDIR` is there) and the `read_write` paths | Landlock |
//! | reaches only the proxy's port and the allowed loopback ports over TCP; no UDP | Landlock (ABI 4) and seccomp |
//! | opens no socket named in the file system (a container runtime's, the session bus): its hook asks over loopback TCP | seccomp |
//! | signals and traces nothing outside its own domain | Landlock scopes (ABI 6), seccomp |
//! | ends with everything it started | the keeper, its subreaper |
//!
//! What it does not do that bubblewrap does: hide `/proc` (other processes' command lines
//! are readable, their memory and environment are not), separate the process ids, mount a
//! private `/tmp` (the worker's is a folder of its home). docs/confinement.md says so.
//!
//! What it must never do: grant a path the plan hides, or call itself a wall where the
//! kernel's Landlock cannot hold the network and signals (before ABI 6).

use std::path::{Path, PathBuf};

use super::settings::{SandboxMinimum, SandboxMode, SandboxNetwork};
use super::{
    home, keeper, proxy, proxy_env, seal, Enclosed, Place, Posture, Wall, WallError, WallSettings,
    WorkerSpec,
};

/// The least Landlock ABI that is a wall on its own: TCP connects are governed from 4,
/// signals and abstract sockets scoped from 6 (before it, a worker could signal the keeper,
/// the runner or the owner's session).
pub const LEAST_ABI: i32 = 6;

/// Device files a worker writes (and reads): the terminal and the sinks.
const WRITABLE_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];
/// Device files a worker only reads.
const READABLE_DEVICES: &[&str] = &["/dev/random", "/dev/urandom", "/dev/fd"];

/// The posture where bubblewrap failed (`why`): the seal alone where the kernel and the
/// settings allow it, else unconfined (`auto`) or an error (`required`).
pub(super) fn fallback(settings: &WallSettings, why: String) -> Result<Posture, WallError> {
    let abi = seal::landlock_abi();
    let sealable = cfg!(target_os = "linux") && abi >= LEAST_ABI && settings.keeper;
    let accepted =
        settings.mode == SandboxMode::Auto || settings.minimum == SandboxMinimum::Landlock;
    match (sealable, accepted) {
        (true, true) => Ok(Posture::Sealed { abi, why }),
        (true, false) => Err(WallError::Required {
            why: format!(
                "{why}; the kernel's Landlock (ABI {abi}) could wall workers without bubblewrap, but [sandbox] minimum = \"bubblewrap\" (set minimum = \"landlock\" to accept it)"
            ),
        }),
        (false, _) => {
            let landlock = if abi >= LEAST_ABI {
                "this executor has no keeper to seal workers with".to_string()
            } else if abi > 0 {
                format!("the kernel's Landlock is ABI {abi}, and a wall without bubblewrap needs ABI {LEAST_ABI} (Linux 6.12) to hold the network and signals")
            } else {
                "the kernel has no Landlock".to_string()
            };
            let why = format!("{why}; {landlock}");
            if settings.mode == SandboxMode::Required {
                Err(WallError::Required { why })
            } else {
                Ok(Posture::Unconfined { why })
            }
        }
    }
}

/// `roots`, with every path in `excluded` taken out: a root holding an excluded path is
/// replaced by its entries, descending around it (Landlock grants only add, so a hidden
/// place inside a granted folder is hidden by not granting that folder).
pub fn beneath_without(roots: &[PathBuf], excluded: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for root in roots {
        grant(root, excluded, &mut out);
    }
    out
}

fn grant(path: &Path, excluded: &[PathBuf], out: &mut Vec<PathBuf>) {
    if excluded.iter().any(|e| e == path) {
        return;
    }
    // A link is granted as what it points to (Landlock follows it), judged again there:
    // `/var/run` is `/run`, which is hidden.
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        if let Ok(target) = path.canonicalize() {
            if target != path {
                grant(&target, excluded, out);
            }
        }
        return;
    }
    if !excluded.iter().any(|e| e.starts_with(path)) {
        out.push(path.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    for entry in entries.flatten() {
        grant(&entry.path(), excluded, out);
    }
}

impl Wall {
    /// `spec` sealed where bubblewrap cannot run: its private home and tmp, the keeper with
    /// the whole seal, the proxy on a loopback port of the host for the allowlist.
    pub(super) fn enclose_sealed(
        &self,
        mut spec: WorkerSpec,
        place: &Place,
    ) -> Result<Enclosed, WallError> {
        let worktree = place
            .worktree
            .canonicalize()
            .map_err(place.error(format!("the worktree {}", place.worktree.display())))?;
        let home_dir = home::prepare(
            &self.settings.homes_dir,
            &place.home,
            place.agent,
            self.template(place, &spec),
        )
        .map_err(place.error(format!(
            "the private home {} in {}",
            place.home,
            self.settings.homes_dir.display()
        )))?;
        home::point_env(&mut spec.env, &home_dir, place.agent);
        let tmp = home_dir.join("tmp");
        std::fs::create_dir_all(&tmp).map_err(place.error(format!("the tmp {}", tmp.display())))?;
        spec.env
            .insert("TMPDIR".to_string(), tmp.to_string_lossy().into_owned());
        let disk = self.disk_budget(vec![worktree.clone(), home_dir.clone()]);
        let mounts = self.mounts(place, &spec, &worktree, home_dir);
        let mut excluded = mounts.hidden.clone();
        excluded.push(PathBuf::from("/dev"));
        let mut read = beneath_without(&[PathBuf::from("/")], &excluded);
        read.extend(mounts.read_only.iter().cloned());
        read.extend(READABLE_DEVICES.iter().map(PathBuf::from));
        let mut write = beneath_without(&mounts.read_write, &mounts.masked_files);
        write.extend(WRITABLE_DEVICES.iter().map(PathBuf::from));
        let network = self.reach(place, &spec);
        let (tcp_ports, gate) = self.sealed_network(place, &mut spec)?;
        let options = keeper::Options {
            grace: spec.grace,
            seal: Some(seal::Seal {
                read,
                write,
                tcp_ports,
                no_udp: self.settings.network != SandboxNetwork::Host,
                no_unix: true,
                drop_capabilities: self.root,
            }),
            argv: Vec::new(),
        };
        let mut argv = options.to_args(&self.settings.executor.to_string_lossy());
        argv.append(&mut spec.argv);
        spec.argv = argv;
        spec.kept = true;
        self.confined_limits(spec, place, disk, gate, network)
    }

    /// The TCP ports a sealed worker may connect to (`None`: the host's network, as
    /// `network = "host"` asks) and the proxy that serves the allowlist on one of them.
    fn sealed_network(
        &self,
        place: &Place,
        spec: &mut WorkerSpec,
    ) -> Result<(Option<Vec<u16>>, Option<proxy::NetGate>), WallError> {
        match self.settings.network {
            SandboxNetwork::Host => Ok((None, None)),
            SandboxNetwork::None => Ok((Some(place.loopback_ports.clone()), None)),
            SandboxNetwork::Allowlist => {
                let (remote, mut ports) = self.allowlist(place, spec);
                ports.extend(&place.loopback_ports);
                let mut gate = None;
                if !remote.is_empty() {
                    let (g, port) = proxy::NetGate::start_tcp(remote, place.label.clone())
                        .map_err(place.error("the network proxy".to_string()))?;
                    proxy_env(&mut spec.env, port);
                    ports.push(port);
                    gate = Some(g);
                }
                Ok((Some(ports), gate))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hidden_place_inside_a_granted_folder_is_left_out_by_descending_around_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let root = dir.path().canonicalize().expect("canon");
        for p in ["a/secret/x", "a/open", "b"] {
            std::fs::create_dir_all(root.join(p)).expect("mkdir");
        }
        std::fs::write(root.join("a/file"), "").expect("write");
        let mut granted = beneath_without(std::slice::from_ref(&root), &[root.join("a/secret")]);
        granted.sort();
        assert_eq!(
            granted,
            vec![root.join("a/file"), root.join("a/open"), root.join("b")]
        );
        assert_eq!(
            beneath_without(&[root.join("b")], &[root.join("a")]),
            vec![root.join("b")]
        );
        assert!(beneath_without(&[root.join("a")], &[root.join("a")]).is_empty());
        // A link into a hidden place is judged where it points (`/var/run` is `/run`).
        std::os::unix::fs::symlink(root.join("a/secret"), root.join("b/run")).expect("link");
        std::os::unix::fs::symlink(root.join("a/open"), root.join("b/open")).expect("link");
        let excluded = [root.join("a/secret"), root.join("b/keep-out")];
        let mut granted = beneath_without(std::slice::from_ref(&root.join("b")), &excluded);
        granted.sort();
        assert_eq!(granted, vec![root.join("a/open")]);
    }
}
