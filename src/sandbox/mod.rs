//! Confinement: the wall every worker process runs inside (docs/design.md §11).
//!
//! Theory of operation. At start, [`Wall::establish`] probes the wall once by running it
//! (see [`probe`]) and settles the posture for the process: confined (bubblewrap works), or
//! unconfined with the reason (`[sandbox] mode = "auto"` without a working wall, or
//! `"off"`); `"required"` without a working wall is an error, and executor refuses to start.
//! Then every worker, whatever it is (an agent, the verify command, the planner, the
//! reviewer, the judge, the analyzer's triage), goes through [`Wall::enclose`] before the
//! supervisor starts it. Confined, its argv becomes `bwrap … -- [bridge …] argv`:
//!
//! | it sees | how |
//! |---|---|
//! | the system, read-only | `--ro-bind / /` |
//! | nothing of the owner's homes, `/tmp`, `/run`, executor's workspace, other worktrees | tmpfs over each ([`bwrap`]) |
//! | its worktree, read-write; the repository's git data, read-only | bound back on top |
//! | a home of its own per run, holding only the agent's configuration | [`home`] |
//! | no process of the host; everything it starts ends with it | `--unshare-pid`, `--die-with-parent` |
//! | the network the config allows | `--unshare-net` and the orchestrator's proxy ([`proxy`], [`bridge`]) |
//! | a cap on its processes, for every owner, root included | `pids.max` in a cgroup of its own, v2 or v1 ([`cgroup`]); else `RLIMIT_NPROC`, which holds for any user but root |
//! | a limit on file size | `RLIMIT_FSIZE` set by the supervisor on `bwrap` |
//! | a limit on memory, where a cgroup v2 subtree can be had | `memory.max` in the same cgroup |
//!
//! Unconfined, the worker's spec is left as it is but for the process cap where a cgroup
//! can be made ([`ProcessCap`]), and the decisions about its tool calls are taken in the
//! policy's strict posture (see `crate::policy`).
//!
//! What it must never do: report a worker confined that is not, widen the wall beyond what
//! the config names, or let a worker's home or network outlive it.

pub mod agent_hosts;
pub mod bridge;
pub mod bwrap;
pub use crate::supervisor::cgroup;
pub mod home;
pub mod host;
pub mod keeper;
pub mod macos;
pub mod probe;
pub mod proxy;
pub mod seal;
mod sealed;
pub mod settings;

use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::supervisor::{OsLimits, Rlimits, WorkerSpec};
use settings::HostPort;
use settings::{SandboxMinimum, SandboxMode, SandboxNetwork};

/// The port executor's proxy listens on inside a wall (unless an allowed loopback port
/// takes it, then the next free one).
pub const PROXY_PORT: u16 = 3128;

#[derive(Debug, Error)]
pub enum WallError {
    #[error("[sandbox] mode = \"required\", but the wall cannot be had: {why}")]
    Required { why: String },
    #[error("cannot prepare the wall of {label}: {what}")]
    Prepare {
        label: String,
        what: String,
        #[source]
        source: std::io::Error,
    },
}

/// How workers run in this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Posture {
    /// `program` is bubblewrap on Linux, `sandbox-exec` on macOS.
    Confined {
        program: PathBuf,
    },
    /// bubblewrap cannot run (`why`), and the seal is the wall: Landlock of ABI `abi`,
    /// seccomp and the keeper (see [`sealed`]).
    Sealed {
        abi: i32,
        why: String,
    },
    Unconfined {
        why: String,
    },
}

/// The small hook binary installed beside `executor` (`src/bin/executor-hook.rs`), shown
/// to a worker with `executor` itself: it takes the options of `executor hook claude` and
/// answers through the relay without loading executor's engine.
pub const THIN_HOOK: &str = "executor-hook";

/// `[sandbox]` resolved: paths absolute, sizes in bytes.
#[derive(Debug, Clone)]
pub struct WallSettings {
    pub mode: SandboxMode,
    /// The least wall `required` accepts.
    pub minimum: SandboxMinimum,
    pub network: SandboxNetwork,
    pub allow: Vec<HostPort>,
    pub read_only: Vec<PathBuf>,
    pub read_write: Vec<PathBuf>,
    pub agent_config: Option<PathBuf>,
    pub max_processes: u64,
    pub max_file_size: u64,
    /// Memory of each worker at most, in bytes (`None`: no limit asked).
    pub max_memory: Option<u64>,
    /// What one worker writes at most in its places, in bytes (`None`: no budget).
    pub max_disk: Option<u64>,
    pub bwrap: Option<PathBuf>,
    /// Executor's own places, never visible to a worker: the workspace (database, config,
    /// plans, roles, logs), the worktrees folder, the repository's checkout.
    pub hidden: Vec<PathBuf>,
    /// Executor's own files (the config, the database and its journal files): covered
    /// where a worker's read-write place holds them, as when the repository is the
    /// workspace and worktrees are off.
    pub masked_files: Vec<PathBuf>,
    /// Where the runs' private homes are kept.
    pub homes_dir: PathBuf,
    /// This binary (the bridge and Claude's hook run it inside the wall).
    pub executor: PathBuf,
    /// Every worker starts under its keeper (`executor sandbox-keep`, see [`keeper`]):
    /// set where `executor` is the real binary, never for tests' walls.
    pub keeper: bool,
}

impl WallSettings {
    /// Settings for a wall that is off: what tests and tools that never confine use.
    pub fn off(homes_dir: PathBuf) -> Self {
        WallSettings {
            mode: SandboxMode::Off,
            minimum: SandboxMinimum::Bubblewrap,
            network: SandboxNetwork::Allowlist,
            allow: Vec::new(),
            read_only: Vec::new(),
            read_write: Vec::new(),
            agent_config: None,
            max_processes: 4096,
            max_file_size: 4 << 30,
            max_memory: None,
            max_disk: None,
            bwrap: None,
            hidden: Vec::new(),
            masked_files: Vec::new(),
            homes_dir,
            executor: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("executor")),
            keeper: false,
        }
    }
}

/// Which agent a worker is: where its configuration lives in its home, which model API it
/// needs by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentFamily {
    Claude,
    Codex,
    Pi,
    Command,
}

impl AgentFamily {
    /// The variable naming the agent's configuration folder, and that folder in its home.
    pub fn config_var(self) -> Option<(&'static str, &'static str)> {
        match self {
            AgentFamily::Claude => Some(("CLAUDE_CONFIG_DIR", ".claude")),
            AgentFamily::Codex => Some(("CODEX_HOME", ".codex")),
            AgentFamily::Pi => Some(("PI_CODING_AGENT_DIR", ".pi/agent")),
            AgentFamily::Command => None,
        }
    }

    /// The model API hosts the agent needs when nothing else is configured.
    pub fn model_hosts(self) -> &'static [&'static str] {
        match self {
            AgentFamily::Claude => &["api.anthropic.com:443"],
            AgentFamily::Codex => &["api.openai.com:443", "chatgpt.com:443"],
            AgentFamily::Pi => &["api.anthropic.com:443", "api.openai.com:443"],
            AgentFamily::Command => &[],
        }
    }
}

/// Where one worker works.
#[derive(Debug, Clone)]
pub struct Place {
    /// Its working directory, read-write unless `read_only_worktree`.
    pub worktree: PathBuf,
    /// The worker only reads (its tool set has no write, edit or shell): the worktree is
    /// bound read-only.
    pub read_only_worktree: bool,
    /// The repository's common git folder, read-only (`None`: not a git worktree).
    pub git_common_dir: Option<PathBuf>,
    /// The name of its private home, shared by the workers of one run so a later phase
    /// can resume the agent's session (`run-42`).
    pub home: String,
    pub agent: AgentFamily,
    /// More paths it reads (the hook's settings and contract copy).
    pub read_only: Vec<PathBuf>,
    /// More paths it writes (the hook's socket folder).
    pub read_write: Vec<PathBuf>,
    /// More loopback TCP ports it connects to where the seal alone walls it (the hook's
    /// relay); inside bubblewrap the wall's loopback is its own.
    pub loopback_ports: Vec<u16>,
    /// Names the worker in log lines and errors.
    pub label: String,
}

impl Place {
    /// Turns an I/O error preparing `what` into the wall's error for this worker.
    fn error(&self, what: String) -> impl FnOnce(std::io::Error) -> WallError {
        let label = self.label.clone();
        move |source| WallError::Prepare {
            label,
            what,
            source,
        }
    }
}

/// The paths of a worker's wall before they become a [`bwrap::Plan`].
#[derive(Debug, Default)]
struct Mounts {
    hidden: Vec<PathBuf>,
    read_only: Vec<PathBuf>,
    read_write: Vec<PathBuf>,
    /// Executor's own files, covered where a read-write place holds them.
    masked_files: Vec<PathBuf>,
}

impl Mounts {
    /// The plan, with only the mounts that change something: the system is read-only
    /// already, so a read-only bind is needed only where something covers the path (a
    /// hidden place, or a read-write bind around it), and a hidden place inside another
    /// needs no tmpfs of its own. Fewer mounts, a faster start.
    fn plan(self, cwd: PathBuf, own_network: bool) -> bwrap::Plan {
        let Mounts {
            hidden,
            mut read_only,
            read_write,
            mut masked_files,
        } = self;
        read_only.retain(|p| {
            hidden
                .iter()
                .chain(&read_write)
                .any(|cover| p.starts_with(cover))
        });
        // Elsewhere the file is hidden with its folder or read-only with the system.
        masked_files.retain(|f| read_write.iter().any(|rw| f.starts_with(rw) && f != rw));
        let hidden = bwrap::needed_covers(hidden, &read_only, &read_write);
        bwrap::Plan {
            hidden,
            read_only,
            read_write,
            masked_files,
            own_network,
            cwd,
            tmp_size: None,
        }
    }
}

/// A worker's spec ready for the supervisor, with what must live as long as it runs.
#[derive(Debug)]
pub struct Enclosed {
    pub spec: WorkerSpec,
    /// Whether the spec runs inside the wall.
    pub confined: bool,
    /// Whether the kernel holds this worker to `[sandbox] max_processes` (a `pids` cgroup
    /// of its own, or `RLIMIT_NPROC` for a confined worker of an owner who is not root).
    pub process_cap: bool,
    /// The worker's network; keep it until the worker is gone.
    pub gate: Option<proxy::NetGate>,
    /// What that network reaches, for the hook's judgement of the web tools (`None`
    /// unconfined: then only the policy stands between the worker and the network).
    pub network: Option<crate::policy::WallNetwork>,
}

/// Where workers' `pids` cgroups can go, surveyed at start.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PidsPlace {
    /// In the v2 tree (a [`cgroup::Decision::Ready`] or [`cgroup::Decision::Enable`]).
    V2(cgroup::Decision),
    /// Under this process's cgroup of a v1 `pids` hierarchy.
    V1(PathBuf),
    Unavailable(String),
}

/// The wall of this process: its settings and the posture the probe settled.
#[derive(Debug)]
pub struct Wall {
    settings: WallSettings,
    posture: Posture,
    /// Where workers' memory cgroups can go (surveyed at start, changing nothing).
    memory: cgroup::Decision,
    /// Where workers' pids cgroups can go (surveyed at start, changing nothing).
    pids: PidsPlace,
    /// Executor runs as root, where `RLIMIT_NPROC` holds nothing.
    root: bool,
    /// The base for workers' v2 cgroups, set up by the first worker that needs one (so
    /// `status` and `doctor`, which never enclose, change no cgroup).
    v2_base: std::sync::OnceLock<Result<PathBuf, String>>,
}

/// What holds each worker to `[sandbox] max_processes`, for `doctor`, `status` and the
/// run's `wall` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessCap {
    /// `pids.max` in a cgroup of each worker's own, under `base`.
    Cgroup {
        version: u8,
        base: PathBuf,
        max: u64,
    },
    /// `RLIMIT_NPROC` (a confined worker, executor not root): it counts every process of
    /// the owner's user, so the owner's other processes share it.
    Rlimit { max: u64 },
    /// Nothing: a worker can start processes without bound.
    Uncapped { why: String },
}

impl ProcessCap {
    /// The mechanism in a word or two: `cgroup pids`, `rlimit` or `none`.
    pub fn mechanism(&self) -> &'static str {
        match self {
            ProcessCap::Cgroup { .. } => "cgroup pids",
            ProcessCap::Rlimit { .. } => "rlimit",
            ProcessCap::Uncapped { .. } => "none",
        }
    }

    pub fn holds(&self) -> bool {
        !matches!(self, ProcessCap::Uncapped { .. })
    }

    /// One sentence for `doctor` and `status`.
    pub fn sentence(&self) -> String {
        match self {
            ProcessCap::Cgroup { version, base, max } => format!(
                "each worker at most {max} processes (pids.max in a cgroup v{version} of its own under {})",
                base.display()
            ),
            ProcessCap::Rlimit { max } => format!(
                "each confined worker at most {max} processes of this user (RLIMIT_NPROC, shared with the user's other processes)"
            ),
            ProcessCap::Uncapped { why } => format!("workers' processes are not capped: {why}"),
        }
    }
}

/// The fix for a host where no cgroup can cap a worker's processes.
pub const PROCESS_CAP_FIX: &str = "run executor in a cgroup it may manage (the systemd unit of `executor service install`, which sets Delegate=yes, or `systemd-run --user --scope -p Delegate=yes executor daemon`; as root, a writable /sys/fs/cgroup), or as a user other than root";

/// Where workers' `pids` cgroups can go, from this process's cgroup facts.
fn pids_place(facts: Option<&cgroup::Facts>) -> PidsPlace {
    let Some(facts) = facts else {
        return PidsPlace::Unavailable("cgroups are Linux only".to_string());
    };
    match cgroup::decide(facts, "pids") {
        cgroup::Decision::Unavailable { why } => match cgroup::v1_pids_base(facts) {
            Ok(base) => PidsPlace::V1(base),
            Err(v1) => PidsPlace::Unavailable(format!("{why}; {v1}")),
        },
        ready => PidsPlace::V2(ready),
    }
}

/// Whether confined workers' memory is limited, for `doctor` and `status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryPosture {
    Limited { bytes: u64, base: PathBuf },
    Unlimited { why: String },
}

impl Wall {
    /// Settles the posture for `settings.mode`: probes the wall unless it is off.
    pub fn establish(settings: WallSettings) -> Result<Wall, WallError> {
        let posture = match settings.mode {
            SandboxMode::Off => Posture::Unconfined {
                why: "[sandbox] mode = \"off\"".to_string(),
            },
            SandboxMode::Auto | SandboxMode::Required => {
                match probe::probe(settings.bwrap.as_deref()) {
                    probe::Probed::Works { program } => Posture::Confined { program },
                    probe::Probed::Unavailable { why } => sealed::fallback(&settings, why)?,
                }
            }
        };
        let facts = cgroup::own_facts();
        let memory = match (&posture, settings.max_memory, &facts) {
            (Posture::Unconfined { .. }, _, _) => cgroup::Decision::Unavailable {
                why: "workers run unconfined".to_string(),
            },
            (_, None, _) => cgroup::Decision::Unavailable {
                why: "[sandbox] max_memory = \"none\"".to_string(),
            },
            (Posture::Confined { .. } | Posture::Sealed { .. }, Some(_), Some(facts)) => {
                cgroup::decide(facts, "memory")
            }
            (Posture::Confined { .. } | Posture::Sealed { .. }, Some(_), None) => {
                cgroup::Decision::Unavailable {
                    why: "cgroups are Linux only".to_string(),
                }
            }
        };
        let wall = Wall {
            pids: pids_place(facts.as_ref()),
            root: nix::unistd::geteuid().is_root(),
            settings,
            posture,
            memory,
            v2_base: std::sync::OnceLock::new(),
        };
        if let (SandboxMode::Required, ProcessCap::Uncapped { why }) =
            (wall.settings.mode, wall.process_cap())
        {
            return Err(WallError::Required {
                why: format!("{why}; {PROCESS_CAP_FIX}"),
            });
        }
        Ok(wall)
    }

    /// A wall that is off, for callers that never confine.
    pub fn off(homes_dir: PathBuf) -> Wall {
        Wall {
            settings: WallSettings::off(homes_dir),
            posture: Posture::Unconfined {
                why: "[sandbox] mode = \"off\"".to_string(),
            },
            memory: cgroup::Decision::Unavailable {
                why: "workers run unconfined".to_string(),
            },
            pids: PidsPlace::Unavailable("the wall is off".to_string()),
            root: false,
            v2_base: std::sync::OnceLock::new(),
        }
    }

    /// What holds each worker to `[sandbox] max_processes`, and if nothing does, why.
    pub fn process_cap(&self) -> ProcessCap {
        let max = self.settings.max_processes;
        let v2_failed = match self.v2_base.get() {
            Some(Err(why)) => Some(why.clone()),
            _ => None,
        };
        let cgroup_why = match (&self.pids, v2_failed) {
            (PidsPlace::V2(_), Some(why)) => why,
            (
                PidsPlace::V2(cgroup::Decision::Ready { base } | cgroup::Decision::Enable { base }),
                None,
            ) => {
                return ProcessCap::Cgroup {
                    version: 2,
                    base: base.clone(),
                    max,
                }
            }
            (PidsPlace::V1(base), _) => {
                return ProcessCap::Cgroup {
                    version: 1,
                    base: base.clone(),
                    max,
                }
            }
            (PidsPlace::V2(cgroup::Decision::Unavailable { why }), None)
            | (PidsPlace::Unavailable(why), _) => why.clone(),
        };
        match (self.is_confined(), self.root) {
            (true, false) => ProcessCap::Rlimit { max },
            (true, true) => ProcessCap::Uncapped {
                why: format!(
                    "executor runs as root, and the kernel never applies RLIMIT_NPROC to root; no cgroup can be made: {cgroup_why}"
                ),
            },
            (false, _) => ProcessCap::Uncapped {
                why: format!("workers run unconfined, and no cgroup can be made: {cgroup_why}"),
            },
        }
    }

    /// Whether each confined worker's memory is held to `[sandbox] max_memory`, and if not,
    /// why.
    pub fn memory(&self) -> MemoryPosture {
        let (bytes, base) = match (&self.memory, self.settings.max_memory) {
            (cgroup::Decision::Unavailable { why }, _) => {
                return MemoryPosture::Unlimited { why: why.clone() }
            }
            (_, None) => {
                return MemoryPosture::Unlimited {
                    why: "[sandbox] max_memory = \"none\"".to_string(),
                }
            }
            (cgroup::Decision::Ready { base } | cgroup::Decision::Enable { base }, Some(b)) => {
                (b, base.clone())
            }
        };
        match self.v2_base.get() {
            Some(Err(why)) => MemoryPosture::Unlimited { why: why.clone() },
            _ => MemoryPosture::Limited { bytes, base },
        }
    }

    /// The base for workers' v2 cgroups; the first call sets it up (see
    /// [`cgroup::establish`]), and when that fails, what it would have held stays unheld
    /// for the process and the reason is logged once.
    fn v2_base(&self) -> &Result<PathBuf, String> {
        self.v2_base.get_or_init(|| {
            let memory = (self.settings.max_memory.is_some() && self.is_confined())
                .then_some(&self.memory);
            let wanted: Vec<(&cgroup::Decision, &str)> =
                [(memory, "memory"), (self.pids_v2(), "pids")]
                    .into_iter()
                    .filter_map(|(d, name)| Some((d?, name)))
                    .filter(|(d, _)| !matches!(d, cgroup::Decision::Unavailable { .. }))
                    .collect();
            let enable: Vec<&str> = wanted
                .iter()
                .filter(|(d, _)| matches!(d, cgroup::Decision::Enable { .. }))
                .map(|(_, name)| *name)
                .collect();
            // Both decisions come from the same facts, so they name the same base; one
            // controller to hand down makes it an Enable for all.
            let base = match wanted.first() {
                None => Err("no cgroup v2 controller to use".to_string()),
                Some((cgroup::Decision::Ready { base } | cgroup::Decision::Enable { base }, _))
                    if !enable.is_empty() =>
                {
                    cgroup::establish(&cgroup::Decision::Enable { base: base.clone() }, &enable)
                }
                Some((decision, _)) => cgroup::establish(decision, &enable),
            };
            match &base {
                Ok(base) => tracing::info!(cgroup = %base.display(), "workers' cgroups go under this cgroup v2"),
                Err(why) => tracing::warn!(%why, "workers get NO cgroup v2: what it would hold them to is not held"),
            }
            base
        })
    }

    fn pids_v2(&self) -> Option<&cgroup::Decision> {
        match &self.pids {
            PidsPlace::V2(d) => Some(d),
            _ => None,
        }
    }

    /// The cgroups of one worker, their caps set: the `pids` cap for any worker where a
    /// cgroup can hold it, memory for a confined one where `max_memory` asks. Returns the
    /// folders and the one whose `pids.max` holds. When `mode = "required"` and the process
    /// cap is the only one the host would have (root), a cgroup that cannot be made refuses
    /// the worker rather than start it uncapped.
    fn worker_cgroups(&self, place: &Place) -> Result<(Vec<PathBuf>, Option<PathBuf>), WallError> {
        let max = self.settings.max_processes;
        let memory = match (self.is_confined(), &self.memory) {
            (true, cgroup::Decision::Ready { .. } | cgroup::Decision::Enable { .. }) => {
                self.settings.max_memory
            }
            _ => None,
        };
        let pids_v2 = self.pids_v2().is_some();
        let mut dirs = Vec::new();
        let mut pids_dir = None;
        let undo = |dirs: &[PathBuf]| {
            for dir in dirs {
                let _ = std::fs::remove_dir(dir);
            }
        };
        if memory.is_some() || pids_v2 {
            if let Ok(base) = self.v2_base() {
                let caps = cgroup::Caps {
                    memory,
                    pids: pids_v2.then_some(max),
                };
                let dir = cgroup::worker(base, caps)
                    .map_err(place.error(format!("the cgroup under {}", base.display())))?;
                if pids_v2 {
                    pids_dir = Some(dir.clone());
                }
                dirs.push(dir);
            }
        }
        if let PidsPlace::V1(base) = &self.pids {
            let caps = cgroup::Caps {
                memory: None,
                pids: Some(max),
            };
            match cgroup::worker(base, caps) {
                Ok(dir) => {
                    pids_dir = Some(dir.clone());
                    dirs.push(dir);
                }
                Err(e) => {
                    undo(&dirs);
                    return Err(place
                        .error(format!("the pids cgroup under {}", base.display()))(
                        e
                    ));
                }
            }
        }
        if pids_dir.is_none() && self.root && self.settings.mode == SandboxMode::Required {
            undo(&dirs);
            return Err(WallError::Required {
                why: format!("{}; {PROCESS_CAP_FIX}", self.process_cap().sentence()),
            });
        }
        Ok((dirs, pids_dir))
    }

    fn rlimits(&self) -> Rlimits {
        Rlimits {
            max_processes: Some(self.settings.max_processes),
            // No one file may pass the disk budget either: the kernel holds that at once.
            max_file_size: self
                .settings
                .max_file_size
                .min(self.settings.max_disk.unwrap_or(u64::MAX)),
        }
    }

    pub fn posture(&self) -> &Posture {
        &self.posture
    }

    pub fn is_confined(&self) -> bool {
        matches!(
            self.posture,
            Posture::Confined { .. } | Posture::Sealed { .. }
        )
    }

    /// The layers each worker is held by, outermost first, for `doctor`, `status` and the
    /// log: `bubblewrap`, `landlock ABI N` and `seccomp` (the seal, inside bubblewrap or
    /// alone), `keeper` (the heartbeat and the subreaper).
    pub fn layers(&self) -> Vec<String> {
        let abi = seal::landlock_abi();
        let keeper = self.settings.keeper && cfg!(target_os = "linux");
        let mut out = Vec::new();
        let sealed = match &self.posture {
            Posture::Confined { .. } => {
                out.push(if cfg!(target_os = "macos") {
                    "sandbox-exec".to_string()
                } else {
                    "bubblewrap".to_string()
                });
                keeper
            }
            Posture::Sealed { .. } => true,
            Posture::Unconfined { .. } => false,
        };
        if sealed {
            if abi > 0 {
                out.push(format!("landlock ABI {abi}"));
            }
            out.push("seccomp".to_string());
        }
        if keeper {
            out.push("keeper".to_string());
        }
        out
    }

    /// The owner's `[sandbox] allow` entries, in their one spelling (what a refusal's
    /// allow line keeps).
    pub fn allow(&self) -> &[HostPort] {
        &self.settings.allow
    }

    /// One line for the log, `status` and run records.
    pub fn describe(&self) -> String {
        let cap = match self.process_cap() {
            ProcessCap::Cgroup { version, max, .. } => {
                format!("processes capped at {max} by cgroup v{version} pids")
            }
            ProcessCap::Rlimit { max } => format!("processes capped at {max} by RLIMIT_NPROC"),
            ProcessCap::Uncapped { .. } => "processes NOT capped".to_string(),
        };
        match &self.posture {
            Posture::Confined { program } => format!(
                "confined ({} at {}, layers {}, network {}, {cap})",
                if cfg!(target_os = "macos") {
                    "sandbox-exec"
                } else {
                    "bubblewrap"
                },
                program.display(),
                self.layers().join(" + "),
                self.settings.network.as_str()
            ),
            Posture::Sealed { why, .. } => format!(
                "confined WITHOUT bubblewrap ({why}): layers {}, network {}, {cap}",
                self.layers().join(" + "),
                self.settings.network.as_str()
            ),
            Posture::Unconfined { why } => format!("unconfined: {why} ({cap})"),
        }
    }

    /// `spec` as it must run at `place`: inside the wall, under its limits, when the posture
    /// is confined; as it is otherwise.
    pub fn enclose(&self, mut spec: WorkerSpec, place: &Place) -> Result<Enclosed, WallError> {
        if let Posture::Sealed { .. } = &self.posture {
            return self.enclose_sealed(spec, place);
        }
        let Posture::Confined { program } = &self.posture else {
            self.keep(&mut spec, None);
            // Unconfined, the spec stays as it is but for the process cap where a cgroup
            // holds it: no rlimits, since an unconfined worker is held by nothing else of
            // the wall anyway, and RLIMIT_NPROC would count the owner's own processes.
            let (cgroups, pids_cgroup) = self.worker_cgroups(place)?;
            let process_cap = pids_cgroup.is_some();
            let disk = self.disk_budget(vec![place.worktree.clone()]);
            if !cgroups.is_empty() || disk.is_some() {
                spec.os_limits = Some(OsLimits {
                    rlimits: None,
                    cgroups,
                    pids_cgroup,
                    detach_terminal: false,
                    disk,
                });
            }
            return Ok(Enclosed {
                spec,
                confined: false,
                process_cap,
                gate: None,
                network: None,
            });
        };
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
        let disk = self.disk_budget(vec![worktree.clone(), home_dir.clone()]);
        let mut mounts = self.mounts(place, &spec, &worktree, home_dir);
        if cfg!(target_os = "macos") {
            return self.enclose_macos(program, spec, place, mounts, tmp);
        }
        let network = self.reach(place, &spec);
        let (prefix, gate) = self.network(place, &mut spec, &mut mounts)?;
        spec.env.insert("TMPDIR".to_string(), "/tmp".to_string());
        let mut plan = mounts.plan(worktree, self.settings.network != SandboxNetwork::Host);
        plan.tmp_size = self.settings.max_disk;
        // The second layer: inside the mounts, the worker writes only where the plan
        // binds read-write (and its own /tmp and /dev), and signals or traces nothing
        // outside its own domain.
        let second_layer = seal::Seal {
            read: vec![PathBuf::from("/")],
            write: plan
                .read_write
                .iter()
                .cloned()
                .chain(["/tmp", "/dev"].map(PathBuf::from))
                .collect(),
            ..seal::Seal::default()
        };
        let outside = heartbeat_outside_the_wall(seal::landlock_abi());
        if outside {
            // Two keepers: inside the wall one seals the worker and reaps what it leaves;
            // the one that holds the runner's heartbeat stays outside (below).
            if let Some(mut inside) = self.keeper_argv(spec.grace, Some(second_layer)) {
                inside.append(&mut spec.argv);
                spec.argv = inside;
            }
        } else {
            self.keep(&mut spec, Some(second_layer));
        }
        let mut argv = bwrap::argv(program, &plan);
        argv.extend(prefix);
        argv.append(&mut spec.argv);
        spec.argv = argv;
        if outside {
            self.keep(&mut spec, None);
        }
        // Last, so a wall that could not be prepared leaves no cgroup behind.
        self.confined_limits(spec, place, disk, gate, network)
    }

    /// A confined worker's limits (its cgroups, rlimits, disk budget, no terminal) set on
    /// `spec`, which is then ready for the supervisor.
    fn confined_limits(
        &self,
        mut spec: WorkerSpec,
        place: &Place,
        disk: Option<crate::supervisor::disk::DiskBudget>,
        gate: Option<proxy::NetGate>,
        network: crate::policy::WallNetwork,
    ) -> Result<Enclosed, WallError> {
        let (cgroups, pids_cgroup) = self.worker_cgroups(place)?;
        let process_cap = pids_cgroup.is_some() || !self.root;
        let mut rlimits = self.rlimits();
        if pids_cgroup.is_some() {
            // The cgroup counts the worker's processes alone; RLIMIT_NPROC would count
            // every process of the owner's user against the worker too.
            rlimits.max_processes = None;
        }
        spec.os_limits = Some(OsLimits {
            rlimits: Some(rlimits),
            cgroups,
            pids_cgroup,
            detach_terminal: true,
            disk,
        });
        Ok(Enclosed {
            spec,
            confined: true,
            process_cap,
            gate,
            network: Some(network),
        })
    }

    /// The disk budget over `places`, where `[sandbox] max_disk` sets one.
    fn disk_budget(&self, places: Vec<PathBuf>) -> Option<crate::supervisor::disk::DiskBudget> {
        self.settings
            .max_disk
            .map(|max| crate::supervisor::disk::DiskBudget { places, max })
    }

    /// Puts the keeper (and its seal, where the kernel has one) before the worker's argv,
    /// where this wall has a keeper; marks the spec kept, so the supervisor gives it the
    /// runner's heartbeat.
    fn keep(&self, spec: &mut WorkerSpec, seal: Option<seal::Seal>) {
        let Some(mut argv) = self.keeper_argv(spec.grace, seal) else {
            return;
        };
        argv.append(&mut spec.argv);
        spec.argv = argv;
        spec.kept = true;
    }

    /// The keeper's command line up to its `--`, where this wall has a keeper.
    fn keeper_argv(
        &self,
        grace: std::time::Duration,
        seal: Option<seal::Seal>,
    ) -> Option<Vec<String>> {
        if !self.settings.keeper || cfg!(not(target_os = "linux")) {
            return None;
        }
        let options = keeper::Options {
            grace,
            seal,
            argv: Vec::new(),
        };
        Some(options.to_args(&self.settings.executor.to_string_lossy()))
    }

    /// The macOS wall: `sandbox-exec -p PROFILE -- argv`, the profile made from the same
    /// places as bubblewrap's mounts (see [`macos`]); its tmp is a folder of its home, and
    /// the allowlist's proxy listens on a loopback port of the host, the only remote the
    /// profile lets it reach besides the allowed loopback ports. Written without `cfg` so
    /// it is compiled and tested on Linux too; only macOS calls it.
    fn enclose_macos(
        &self,
        sandbox_exec: &Path,
        mut spec: WorkerSpec,
        place: &Place,
        mounts: Mounts,
        tmp: PathBuf,
    ) -> Result<Enclosed, WallError> {
        std::fs::create_dir_all(&tmp).map_err(place.error(format!("the tmp {}", tmp.display())))?;
        spec.env
            .insert("TMPDIR".to_string(), tmp.to_string_lossy().into_owned());
        let inside_writable = |p: &PathBuf| {
            mounts
                .read_write
                .iter()
                .any(|rw| p.starts_with(rw) && p != rw)
        };
        let masked = mounts
            .hidden
            .iter()
            .chain(&mounts.masked_files)
            .filter(|p| inside_writable(p))
            .cloned()
            .collect();
        let mut profile = macos::Profile {
            hidden: mounts.hidden,
            read_only: mounts.read_only,
            read_write: mounts.read_write,
            masked,
            ..macos::Profile::default()
        };
        let mut gate = None;
        let network = self.reach(place, &spec);
        match self.settings.network {
            SandboxNetwork::Host => profile.host_network = true,
            SandboxNetwork::None => {}
            SandboxNetwork::Allowlist => {
                let (remote, loopback) = self.allowlist(place, &spec);
                profile.loopback_ports = loopback;
                if !remote.is_empty() {
                    let (g, port) = proxy::NetGate::start_tcp(remote, place.label.clone())
                        .map_err(place.error("the network proxy".to_string()))?;
                    profile.proxy_port = Some(port);
                    proxy_env(&mut spec.env, port);
                    gate = Some(g);
                }
            }
        }
        spec.argv = macos::argv(sandbox_exec, &profile, std::mem::take(&mut spec.argv));
        spec.os_limits = Some(OsLimits {
            rlimits: Some(self.rlimits()),
            detach_terminal: true,
            ..OsLimits::default()
        });
        Ok(Enclosed {
            spec,
            confined: true,
            process_cap: !self.root,
            gate,
            network: Some(network),
        })
    }

    /// The remote hosts a worker at `place` reaches, in the policy's terms: the allowlist's
    /// remote hosts (loopback forwards are not the web tools'), all of them, or none.
    fn reach(&self, place: &Place, spec: &WorkerSpec) -> crate::policy::WallNetwork {
        use crate::policy::WallNetwork;
        match self.settings.network {
            SandboxNetwork::Host => WallNetwork::Host,
            SandboxNetwork::None => WallNetwork::None,
            SandboxNetwork::Allowlist => {
                let (remote, _) = self.allowlist(place, spec);
                WallNetwork::Allowlist(
                    remote
                        .iter()
                        .map(|h| format!("{}:{}", h.host, h.port))
                        .collect(),
                )
            }
        }
    }

    /// What the worker at `place` sees: the places hidden, and what is bound back.
    fn mounts(
        &self,
        place: &Place,
        spec: &WorkerSpec,
        worktree: &Path,
        home_dir: PathBuf,
    ) -> Mounts {
        let path_var = spec.env.get("PATH").map(String::as_str);
        let mut m = Mounts {
            read_write: vec![home_dir],
            ..Mounts::default()
        };
        if place.read_only_worktree {
            m.read_only.push(worktree.to_path_buf());
        } else {
            m.read_write.push(worktree.to_path_buf());
        }
        m.read_only
            .extend(place.git_common_dir.iter().filter_map(|p| canonical(p)));
        m.read_only.extend(canonical(&self.settings.executor));
        // The small hook beside it, which Claude's workers run before every tool call.
        m.read_only
            .extend(canonical(&self.settings.executor.with_file_name(THIN_HOOK)));
        if let Some(program) = spec.argv.first() {
            m.read_only.extend(program_root(program, path_var));
        }
        m.read_only
            .extend(path_dirs(path_var, &self.settings.hidden));
        m.read_only
            .extend(self.settings.read_only.iter().filter_map(|p| canonical(p)));
        m.read_only
            .extend(place.read_only.iter().filter_map(|p| canonical(p)));
        m.read_write
            .extend(place.read_write.iter().filter_map(|p| canonical(p)));
        m.read_write
            .extend(self.settings.read_write.iter().filter_map(|p| canonical(p)));
        let system = [
            "/home", "/root", "/tmp", "/var/tmp", "/run", "/mnt", "/media",
        ];
        m.hidden = system
            .iter()
            .map(PathBuf::from)
            .chain(std::env::var_os("HOME").map(PathBuf::from))
            .chain(self.settings.hidden.iter().cloned())
            .filter_map(|p| canonical(&p))
            .collect();
        // Only files that exist: a bind onto a missing one would create it.
        m.masked_files = self
            .settings
            .masked_files
            .iter()
            .filter_map(|p| canonical(p))
            .filter(|p| p.is_file())
            .collect();
        m
    }

    /// The worker's network: for the allowlist, executor's proxy and forwards (kept alive
    /// by the returned gate) and the bridge that starts the worker inside the wall (the
    /// returned argv prefix); nothing for `none`; the host's DNS settings for `host`.
    fn network(
        &self,
        place: &Place,
        spec: &mut WorkerSpec,
        mounts: &mut Mounts,
    ) -> Result<(Vec<String>, Option<proxy::NetGate>), WallError> {
        match self.settings.network {
            SandboxNetwork::Host => {
                // DNS: resolv.conf often points into the hidden /run.
                mounts
                    .read_only
                    .extend(canonical(Path::new("/etc/resolv.conf")));
                return Ok((Vec::new(), None));
            }
            SandboxNetwork::None => return Ok((Vec::new(), None)),
            SandboxNetwork::Allowlist => {}
        }
        let (remote, loopback) = self.allowlist(place, spec);
        // Nothing allowed is the network `none`: no proxy, no bridge to start.
        if remote.is_empty() && loopback.is_empty() {
            return Ok((Vec::new(), None));
        }
        let proxy_port = (PROXY_PORT..)
            .find(|p| !loopback.contains(p))
            .unwrap_or(PROXY_PORT);
        let dir = socket_dir();
        let gate = proxy::NetGate::start(&dir, remote, &loopback, place.label.clone())
            .map_err(place.error(format!("the network gate in {}", dir.display())))?;
        mounts.read_write.push(dir.clone());
        let mut prefix = vec![
            self.settings.executor.to_string_lossy().into_owned(),
            "sandbox-bridge".to_string(),
            "--listen".to_string(),
            format!("{proxy_port}={}", proxy::proxy_socket(&dir).display()),
        ];
        for port in &loopback {
            prefix.push("--listen".to_string());
            prefix.push(format!(
                "{port}={}",
                proxy::forward_socket(&dir, *port).display()
            ));
        }
        prefix.push("--".to_string());
        proxy_env(&mut spec.env, proxy_port);
        Ok((prefix, Some(gate)))
    }

    /// The agent's configuration to copy into a new home: `[sandbox] agent_config`, else
    /// the folder the agent's variable names in the worker's environment.
    fn template(&self, place: &Place, spec: &WorkerSpec) -> Option<PathBuf> {
        self.settings.agent_config.clone().or_else(|| {
            let (var, _) = place.agent.config_var()?;
            spec.env.get(var).map(PathBuf::from)
        })
    }

    /// The remote hosts the proxy lets through and the loopback ports forwarded: the agent's
    /// model API, the hosts of `*_BASE_URL` variables the worker is given, the providers the
    /// agent's own configuration names, and `allow`.
    fn allowlist(&self, place: &Place, spec: &WorkerSpec) -> (Vec<HostPort>, Vec<u16>) {
        let mut all: Vec<HostPort> = place
            .agent
            .model_hosts()
            .iter()
            .filter_map(|h| settings::parse_host_port(h).ok())
            .collect();
        for (key, value) in &spec.env {
            if key.ends_with("_BASE_URL") {
                all.extend(agent_hosts::host_of_url(value));
            }
        }
        if let Some(dir) = self.template(place, spec) {
            all.extend(agent_hosts::configured(place.agent, &dir));
        }
        all.extend(self.settings.allow.iter().cloned());
        all.sort();
        all.dedup();
        let (loopback, remote): (Vec<HostPort>, Vec<HostPort>) =
            all.into_iter().partition(HostPort::is_loopback);
        let mut ports: Vec<u16> = loopback.iter().map(|h| h.port).collect();
        ports.sort_unstable();
        ports.dedup();
        (remote, ports)
    }
}

/// The proxy variables the agents honour, pointing at executor's proxy on `port`.
fn proxy_env(env: &mut std::collections::HashMap<String, String>, port: u16) {
    let url = format!("http://127.0.0.1:{port}");
    for key in ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"] {
        env.insert(key.to_string(), url.clone());
    }
    for key in ["NO_PROXY", "no_proxy"] {
        env.insert(key.to_string(), "localhost,127.0.0.1,::1".to_string());
    }
    // Node's own fetch honours the proxy variables only when asked (Node 24+).
    env.insert("NODE_USE_ENV_PROXY".to_string(), "1".to_string());
}

/// `path` with its symlinks resolved, when it exists.
fn canonical(path: &Path) -> Option<PathBuf> {
    path.canonicalize().ok()
}

/// What a worker's program needs to be seen: the folder of the real file (and, for a
/// program inside a `node_modules` tree, the folder holding that tree, since the script
/// loads its dependencies from there).
fn program_root(program: &str, path: Option<&str>) -> Option<PathBuf> {
    let found = if program.contains('/') {
        PathBuf::from(program)
    } else {
        crate::supervisor::program::find_program(program, path.map(std::ffi::OsStr::new))?
    };
    let real = found.canonicalize().ok()?;
    let mut root = real.parent()?.to_path_buf();
    let mut at = real.as_path();
    while let Some(parent) = at.parent() {
        if at.file_name().is_some_and(|n| n == "node_modules") {
            root = parent.to_path_buf();
        }
        at = parent;
    }
    Some(root)
}

/// The folders of the worker's `PATH` that exist, absolute, and are not one of executor's
/// hidden places (a toolchain in `~/.cargo/bin` is seen; the workspace is not).
fn path_dirs(path: Option<&str>, hidden: &[PathBuf]) -> Vec<PathBuf> {
    let Some(path) = path else {
        return Vec::new();
    };
    let hidden: Vec<PathBuf> = hidden.iter().filter_map(|p| canonical(p)).collect();
    std::env::split_paths(path)
        .filter(|p| p.is_absolute())
        .filter_map(|p| canonical(&p))
        .filter(|p| !hidden.iter().any(|h| p.starts_with(h)))
        .collect()
}

/// A folder for one worker's sockets: short (a unix socket path holds at most 107 bytes)
/// and new.
fn socket_dir() -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("executor-net-{}-{n}", std::process::id()))
}

/// Whether the keeper that holds the runner's heartbeat must run outside bubblewrap, with
/// a second keeper inside to seal the worker: below Landlock ABI 6 nothing scopes a
/// worker's signals, and in its own pid namespace it could stop a keeper there, so nothing
/// would end it once its runner's lease lapsed. From ABI 6 the worker's domain cannot
/// signal the keeper beside it, and one keeper (one exec less per worker) is enough.
pub(crate) fn heartbeat_outside_the_wall(landlock_abi: i32) -> bool {
    landlock_abi < 6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heartbeat_leaves_the_wall_where_landlock_cannot_scope_signals() {
        for abi in 0..6 {
            assert!(heartbeat_outside_the_wall(abi), "ABI {abi}");
        }
        for abi in 6..9 {
            assert!(!heartbeat_outside_the_wall(abi), "ABI {abi}");
        }
    }

    #[test]
    fn a_program_in_a_node_modules_tree_brings_the_tree() {
        let dir = tempfile::tempdir().expect("tmp");
        let pkg = dir.path().join("lib/node_modules/@x/cli/bin");
        std::fs::create_dir_all(&pkg).expect("mkdir");
        let script = pkg.join("cli.js");
        std::fs::write(&script, "").expect("write");
        let root = program_root(script.to_str().expect("utf-8"), None).expect("root");
        assert_eq!(root, dir.path().canonicalize().expect("canon").join("lib"));
        let plain = dir.path().join("bin");
        std::fs::create_dir_all(&plain).expect("mkdir");
        std::fs::write(plain.join("tool"), "").expect("write");
        assert_eq!(
            program_root(plain.join("tool").to_str().expect("utf-8"), None),
            plain.canonicalize().ok()
        );
    }

    #[test]
    fn path_folders_inside_executors_places_are_not_bound() {
        let dir = tempfile::tempdir().expect("tmp");
        let ws = dir.path().join("ws");
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(ws.join("bin")).expect("mkdir");
        std::fs::create_dir_all(&bin).expect("mkdir");
        let path = format!(
            "{}:{}:relative:/nonexistent",
            ws.join("bin").display(),
            bin.display()
        );
        assert_eq!(
            path_dirs(Some(&path), std::slice::from_ref(&ws)),
            vec![bin.canonicalize().expect("canon")]
        );
    }

    #[test]
    fn the_allowlist_is_the_model_api_the_base_urls_and_allow() {
        let mut settings = WallSettings::off(PathBuf::from("/nowhere"));
        settings.allow = vec![
            settings::parse_host_port("pypi.org:443").expect("hp"),
            settings::parse_host_port("127.0.0.1:11434").expect("hp"),
        ];
        let wall = Wall {
            settings,
            posture: Posture::Unconfined { why: "test".into() },
            memory: cgroup::Decision::Unavailable { why: "test".into() },
            pids: PidsPlace::Unavailable("test".into()),
            root: false,
            v2_base: std::sync::OnceLock::new(),
        };
        let mut spec = crate::supervisor::WorkerSpec::for_test(vec!["claude".into()]);
        spec.env.insert(
            "ANTHROPIC_BASE_URL".into(),
            "http://127.0.0.1:4010/v1".into(),
        );
        let place = |agent| Place {
            worktree: PathBuf::from("/w"),
            read_only_worktree: false,
            git_common_dir: None,
            home: "run-1".into(),
            agent,
            read_only: Vec::new(),
            read_write: Vec::new(),
            loopback_ports: Vec::new(),
            label: "run 1".into(),
        };
        let (remote, ports) = wall.allowlist(&place(AgentFamily::Claude), &spec);
        let remote: Vec<String> = remote.iter().map(ToString::to_string).collect();
        assert_eq!(remote, ["api.anthropic.com:443", "pypi.org:443"]);
        assert_eq!(ports, [4010, 11434]);
        // The hook's web tools are judged by the same remote hosts, loopback left out.
        use crate::policy::WallNetwork;
        assert_eq!(
            wall.reach(&place(AgentFamily::Claude), &spec),
            WallNetwork::Allowlist(remote.clone())
        );
        let command = place(AgentFamily::Command);
        let (remote, ports) = wall.allowlist(&command, &WorkerSpec::for_test(vec![]));
        assert_eq!(remote.len(), 1, "only pypi.org from allow");
        assert_eq!(ports, [11434]);
        // A provider in Codex's own config.toml is reached with no allow line.
        let home = tempfile::tempdir().expect("tmp");
        std::fs::write(
            home.path().join("config.toml"),
            "model_provider = \"local\"\n[model_providers.local]\nbase_url = \"http://127.0.0.1:4020/v1\"\n",
        )
        .expect("config.toml");
        let mut codex = crate::supervisor::WorkerSpec::for_test(vec!["codex".into()]);
        codex
            .env
            .insert("CODEX_HOME".into(), home.path().display().to_string());
        let (_, ports) = wall.allowlist(&place(AgentFamily::Codex), &codex);
        assert_eq!(ports, [4020, 11434]);
    }

    fn wall_with(pids: PidsPlace, root: bool, confined: bool, mode: SandboxMode) -> Wall {
        let mut settings = WallSettings::off(PathBuf::from("/nowhere"));
        settings.mode = mode;
        settings.max_processes = 64;
        Wall {
            settings,
            posture: if confined {
                Posture::Confined {
                    program: PathBuf::from("/usr/bin/bwrap"),
                }
            } else {
                Posture::Unconfined { why: "test".into() }
            },
            memory: cgroup::Decision::Unavailable { why: "test".into() },
            pids,
            root,
            v2_base: std::sync::OnceLock::new(),
        }
    }

    #[test]
    fn the_process_cap_is_a_cgroup_where_one_can_be_had_and_rlimit_only_for_a_user_not_root() {
        let none = || PidsPlace::Unavailable("no pids controller".into());
        let v1 = PidsPlace::V1(PathBuf::from("/sys/fs/cgroup/pids/ci"));
        for (root, confined) in [(true, true), (true, false), (false, false), (false, true)] {
            let wall = wall_with(v1.clone(), root, confined, SandboxMode::Auto);
            assert_eq!(
                wall.process_cap(),
                ProcessCap::Cgroup {
                    version: 1,
                    base: PathBuf::from("/sys/fs/cgroup/pids/ci"),
                    max: 64
                }
            );
        }
        let user = wall_with(none(), false, true, SandboxMode::Auto);
        assert_eq!(user.process_cap(), ProcessCap::Rlimit { max: 64 });
        let root = wall_with(none(), true, true, SandboxMode::Auto).process_cap();
        assert!(
            matches!(&root, ProcessCap::Uncapped { why } if why.contains("root") && why.contains("RLIMIT_NPROC") && why.contains("no pids controller")),
            "{root:?}"
        );
        assert_eq!(root.mechanism(), "none");
        let unconfined = wall_with(none(), false, false, SandboxMode::Off).process_cap();
        assert!(
            matches!(&unconfined, ProcessCap::Uncapped { why } if why.contains("unconfined")),
            "{unconfined:?}"
        );
        assert!(wall_with(none(), false, true, SandboxMode::Auto)
            .describe()
            .contains("processes capped at 64 by RLIMIT_NPROC"));
        assert!(wall_with(none(), true, true, SandboxMode::Auto)
            .describe()
            .contains("processes NOT capped"));
    }

    #[test]
    fn required_as_root_refuses_a_worker_no_cgroup_can_cap() {
        let dir = tempfile::tempdir().expect("tmp");
        let place = Place {
            worktree: dir.path().to_path_buf(),
            read_only_worktree: false,
            git_common_dir: None,
            home: "run-1".into(),
            agent: AgentFamily::Command,
            read_only: Vec::new(),
            read_write: Vec::new(),
            loopback_ports: Vec::new(),
            label: "run 1".into(),
        };
        let none = || PidsPlace::Unavailable("no pids controller".into());
        let refused = wall_with(none(), true, false, SandboxMode::Required).worker_cgroups(&place);
        assert!(
            matches!(&refused, Err(WallError::Required { why }) if why.contains("Delegate=yes")),
            "{refused:?}"
        );
        // auto as root goes on uncapped (and says so in doctor, status and the wall line).
        let (dirs, pids) = wall_with(none(), true, false, SandboxMode::Auto)
            .worker_cgroups(&place)
            .expect("auto goes on");
        assert!(dirs.is_empty() && pids.is_none());
        // A v1 base gets a cgroup of the worker's own with its pids.max.
        let base = dir.path().join("pids");
        std::fs::create_dir_all(&base).expect("mkdir");
        let (dirs, pids) = wall_with(
            PidsPlace::V1(base.clone()),
            true,
            false,
            SandboxMode::Required,
        )
        .worker_cgroups(&place)
        .expect("a cgroup");
        let pids = pids.expect("the pids cgroup");
        assert_eq!(dirs, std::slice::from_ref(&pids));
        assert!(pids.starts_with(&base));
        assert_eq!(
            std::fs::read_to_string(pids.join("pids.max")).expect("max"),
            "64"
        );
    }

    /// The macOS wall's spec, built here on Linux: what macOS would run.
    #[tokio::test]
    async fn on_macos_a_worker_runs_under_sandbox_exec_with_its_profile() {
        let dir = tempfile::tempdir().expect("tmp");
        let worktree = dir.path().join("ws/worktrees/run-1");
        std::fs::create_dir_all(&worktree).expect("mkdir");
        let mut settings = WallSettings::off(dir.path().join("ws/.executor/homes"));
        settings.mode = SandboxMode::Required;
        settings.hidden = vec![dir.path().join("ws")];
        settings.allow = vec![settings::parse_host_port("127.0.0.1:11434").expect("hp")];
        let wall = Wall {
            settings,
            posture: Posture::Confined {
                program: PathBuf::from("/usr/bin/sandbox-exec"),
            },
            memory: cgroup::Decision::Unavailable { why: "test".into() },
            pids: PidsPlace::Unavailable("test".into()),
            root: false,
            v2_base: std::sync::OnceLock::new(),
        };
        let place = Place {
            worktree: worktree.clone(),
            read_only_worktree: false,
            git_common_dir: None,
            home: "run-1".into(),
            agent: AgentFamily::Claude,
            read_only: Vec::new(),
            read_write: Vec::new(),
            loopback_ports: Vec::new(),
            label: "run 1".into(),
        };
        let spec = WorkerSpec::for_test(vec!["/bin/echo".into(), "hi".into()]);
        let worktree = worktree.canonicalize().expect("canon");
        let home = dir
            .path()
            .canonicalize()
            .expect("canon")
            .join("ws/.executor/homes/run-1");
        std::fs::create_dir_all(&home).expect("mkdir");
        let mounts = wall.mounts(&place, &spec, &worktree, home.clone());
        let enclosed = wall
            .enclose_macos(
                Path::new("/usr/bin/sandbox-exec"),
                spec,
                &place,
                mounts,
                home.join("tmp"),
            )
            .expect("enclosed");
        let argv = &enclosed.spec.argv;
        assert_eq!(argv[..2], ["/usr/bin/sandbox-exec", "-p"]);
        assert_eq!(argv[3..], ["--", "/bin/echo", "hi"]);
        let profile = &argv[2];
        assert!(profile.starts_with("(version 1)\n(deny default)\n"));
        assert!(profile.contains(&format!(
            "(deny file-read* (subpath \"{}\"))",
            dir.path()
                .canonicalize()
                .expect("canon")
                .join("ws")
                .display()
        )));
        assert!(profile.contains(&format!(
            "(allow file-read* file-write* (subpath \"{}\"))",
            worktree.display()
        )));
        assert!(profile.contains(&format!(
            "(allow file-read* file-write* (subpath \"{}\"))",
            home.display()
        )));
        // Claude's model API goes through the proxy on a loopback port; the local model
        // server's port is allowed as it is.
        let port = enclosed.spec.env["HTTPS_PROXY"]
            .rsplit(':')
            .next()
            .and_then(|p| p.parse::<u16>().ok())
            .expect("a proxy port");
        assert!(profile.contains(&format!("(remote ip \"localhost:{port}\")")));
        assert!(profile.contains("(remote ip \"localhost:11434\")"));
        assert_eq!(
            enclosed.spec.env["TMPDIR"],
            home.join("tmp").to_string_lossy()
        );
        assert!(enclosed.confined && enclosed.gate.is_some());
        assert!(enclosed.spec.os_limits.is_some());
    }
}
