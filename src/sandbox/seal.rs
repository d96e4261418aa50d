//! The seal: the kernel's own limits a worker's process takes on just before it runs its
//! program, inherited by everything it starts and impossible to lift (Landlock and a
//! seccomp filter, both under `no_new_privs`).
//!
//! Inside bubblewrap it is a second layer: should a mount of the wall be wrong, the worker
//! still writes only where the wall's plan says, cannot signal or trace a process outside
//! its own domain (executor, the keeper, another run), and has no `ptrace`,
//! `process_vm_readv`/`writev`, io_uring or vsock. Where bubblewrap cannot run it is the
//! wall itself (see [`super::keeper`] and docs/confinement.md): it then also says what the
//! worker may read, which TCP ports it may connect to, and refuses UDP.
//!
//! [`Seal`] is plain data, carried on the keeper's command line ([`Seal::to_args`],
//! [`Seal::parse_arg`]); [`prepare`] builds the kernel objects before the fork, and
//! [`Prepared::enforce`] applies them in the child, between fork and exec.
//!
//! What it must never do: grant a right the seal does not name, or report a layer as
//! applied that the kernel did not take (a kernel without Landlock leaves the seal to
//! seccomp, and the keeper says so on its stderr).

use std::path::PathBuf;

/// What one worker's seal allows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seal {
    /// Read and execute beneath these.
    pub read: Vec<PathBuf>,
    /// Every file right beneath these (read, write, create, remove, connect a socket).
    pub write: Vec<PathBuf>,
    /// TCP connects are allowed to these ports only, and binds to none; `None`: TCP is
    /// left to the network namespace (inside bubblewrap it has no route but the wall's
    /// own loopback, where a worker's tests may listen and connect freely).
    pub tcp_ports: Option<Vec<u16>>,
    /// Refuse UDP and raw sockets (the host's network is shared: only the proxy's port is
    /// a way out).
    pub no_udp: bool,
    /// Refuse sockets named in the file system: `socket(AF_UNIX)`, and datagram pairs (whose
    /// `sendto` may name a path). Landlock does not govern connecting to a host's socket (a
    /// container runtime's, the session bus, a database's), and the seal alone hides no
    /// path from `connect`; pairs of connected stream sockets stay allowed.
    pub no_unix: bool,
    /// Drop every capability (a worker of root, where no user namespace took them away).
    pub drop_capabilities: bool,
}

impl Seal {
    /// The keeper's options for this seal, each value an argument of its own.
    pub fn to_args(&self) -> Vec<String> {
        let mut out = Vec::new();
        for p in &self.read {
            out.push("--seal-read".to_string());
            out.push(p.to_string_lossy().into_owned());
        }
        for p in &self.write {
            out.push("--seal-write".to_string());
            out.push(p.to_string_lossy().into_owned());
        }
        if let Some(ports) = &self.tcp_ports {
            out.push("--seal-tcp".to_string());
            out.push(
                ports
                    .iter()
                    .map(u16::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
        if self.no_udp {
            out.push("--seal-no-udp".to_string());
        }
        if self.no_unix {
            out.push("--seal-no-unix".to_string());
        }
        if self.drop_capabilities {
            out.push("--seal-drop-caps".to_string());
        }
        out
    }

    /// Takes one keeper option (`flag`, and its value from `value` when it has one);
    /// returns whether the flag was the seal's, or why its value is wrong.
    pub fn parse_arg(
        &mut self,
        flag: &str,
        value: &mut dyn FnMut() -> Option<String>,
    ) -> Result<bool, String> {
        let mut take = |what: &str| value().ok_or_else(|| format!("{what} needs a value"));
        match flag {
            "--seal-read" => self.read.push(take(flag)?.into()),
            "--seal-write" => self.write.push(take(flag)?.into()),
            "--seal-tcp" => {
                let text = take(flag)?;
                let ports = text
                    .split(',')
                    .filter(|p| !p.is_empty())
                    .map(|p| p.parse::<u16>().map_err(|_| format!("`{p}` is not a port")))
                    .collect::<Result<Vec<_>, _>>()?;
                self.tcp_ports = Some(ports);
            }
            "--seal-no-udp" => self.no_udp = true,
            "--seal-no-unix" => self.no_unix = true,
            "--seal-drop-caps" => self.drop_capabilities = true,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// What the kernel took of a seal, for the keeper's one line on stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    /// The Landlock ABI the kernel speaks (0: none).
    pub landlock_abi: i32,
    /// Whether the Landlock ruleset was enforced whole, in part, or not at all.
    pub landlock: &'static str,
    pub seccomp: bool,
}

/// The Landlock ABI of the running kernel (0 where it has none). One system call.
pub fn landlock_abi() -> i32 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) only
        // returns the ABI version (or an error); it takes no pointer.
        let abi = unsafe {
            nix::libc::syscall(
                nix::libc::SYS_landlock_create_ruleset,
                std::ptr::null::<u8>(),
                0usize,
                1u32,
            )
        };
        i32::try_from(abi).unwrap_or(0).max(0)
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

#[cfg(target_os = "linux")]
pub use linux::{prepare, Prepared};

#[cfg(target_os = "linux")]
mod linux {
    //! The kernel objects of a seal. Built before the fork (opening paths, compiling the
    //! filter allocate); enforced after it with system calls only.
    use std::collections::BTreeMap;

    use landlock::{
        Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, PathFd,
        Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
    };
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule,
    };

    use super::{Seal, Taken};

    /// The newest ABI whose rights this seal asks for; a kernel with less gets what it
    /// has (best effort), a kernel with more gives no right this code has not vetted.
    const ASKED: ABI = ABI::V6;

    /// A seal ready to enforce.
    pub struct Prepared {
        ruleset: Option<RulesetCreated>,
        filter: BpfProgram,
        /// Refuses the x32 calls of x86_64 (the same calls under other numbers, which the
        /// filter's table does not name).
        x32: Option<BpfProgram>,
        drop_capabilities: bool,
        abi: i32,
    }

    impl std::fmt::Debug for Prepared {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Prepared")
                .field("landlock_abi", &self.abi)
                .finish_non_exhaustive()
        }
    }

    /// Builds the ruleset and the filter. A path of the seal that does not exist is
    /// skipped (nothing beneath it can be reached either); a kernel without Landlock
    /// leaves `ruleset` empty.
    pub fn prepare(seal: &Seal) -> Result<Prepared, String> {
        let abi = super::landlock_abi();
        let ruleset = if abi > 0 {
            Some(ruleset(seal).map_err(|e| format!("the Landlock ruleset: {e}"))?)
        } else {
            None
        };
        Ok(Prepared {
            ruleset,
            filter: filter(seal)?,
            x32: cfg!(target_arch = "x86_64").then(no_x32),
            drop_capabilities: seal.drop_capabilities,
            abi,
        })
    }

    fn ruleset(seal: &Seal) -> Result<RulesetCreated, landlock::RulesetError> {
        let all = AccessFs::from_all(ASKED);
        let read = AccessFs::from_read(ASKED);
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(all)?
            .scope(Scope::from_all(ASKED))?;
        if seal.tcp_ports.is_some() {
            ruleset = ruleset.handle_access(AccessNet::from_all(ASKED))?;
        }
        let mut created = ruleset.create()?;
        for (paths, access) in [(&seal.read, read), (&seal.write, all)] {
            for path in paths {
                let Ok(fd) = PathFd::new(path) else { continue };
                // A file (not a folder) takes only the rights a file can have.
                let access = if path.is_dir() {
                    access
                } else {
                    access & AccessFs::from_file(ASKED)
                };
                created = created.add_rule(PathBeneath::new(fd, access))?;
            }
        }
        for port in seal.tcp_ports.iter().flatten() {
            created = created.add_rule(NetPort::new(*port, AccessNet::ConnectTcp))?;
        }
        Ok(created)
    }

    /// DCCP's socket type (`SOCK_DCCP`), which `libc` lacks.
    const SOCK_DCCP: i32 = 6;
    /// The obsolete packet socket type (`SOCK_PACKET`), deprecated in `libc`.
    const SOCK_PACKET: i32 = 10;

    /// The seccomp filter: the calls no worker needs and an attacker would (another
    /// process's memory, the io_uring side door past seccomp and Landlock's hooks, vsock to
    /// a hypervisor, the kernel's keyrings, modules, BPF); with `no_udp`, datagram and raw
    /// sockets of IPv4 and IPv6, every IP socket but TCP's, and every family but local,
    /// netlink and IP; with `no_unix`, sockets named in the file system. Each fails with EPERM, as a refused call would anyway.
    fn filter(seal: &Seal) -> Result<BpfProgram, String> {
        use nix::libc;
        let error = |e: seccompiler::BackendError| format!("the seccomp filter: {e}");
        let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        for call in [
            libc::SYS_ptrace,
            libc::SYS_process_vm_readv,
            libc::SYS_process_vm_writev,
            libc::SYS_io_uring_setup,
            libc::SYS_io_uring_enter,
            libc::SYS_io_uring_register,
            libc::SYS_keyctl,
            libc::SYS_add_key,
            libc::SYS_request_key,
            libc::SYS_init_module,
            libc::SYS_finit_module,
            libc::SYS_delete_module,
            libc::SYS_kexec_load,
            libc::SYS_bpf,
            libc::SYS_perf_event_open,
            libc::SYS_userfaultfd,
        ] {
            rules.insert(call, Vec::new());
        }
        let domain = |family: i32| {
            SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, family as u64)
        };
        // The type's low bits, without SOCK_NONBLOCK and SOCK_CLOEXEC.
        let kind = |k: i32| {
            SeccompCondition::new(
                1,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::MaskedEq(0xf),
                k as u64,
            )
        };
        let mut socket =
            vec![SeccompRule::new(vec![domain(libc::AF_VSOCK).map_err(error)?]).map_err(error)?];
        if seal.no_udp {
            // What is left of the host's network is TCP, which Landlock governs: an IPv4 or
            // IPv6 socket is a stream of TCP (protocol 0 or IPPROTO_TCP) or nothing. Every
            // other kind (datagrams, raw, SCTP, DCCP, Multipath TCP, SMC over TCP) would
            // reach any host and port past Landlock's TCP rules.
            let protocol = |op: SeccompCmpOp, p: i32| {
                SeccompCondition::new(2, SeccompCmpArgLen::Dword, op, p as u64)
            };
            for family in [libc::AF_INET, libc::AF_INET6] {
                for k in [
                    libc::SOCK_DGRAM,
                    libc::SOCK_RAW,
                    libc::SOCK_RDM,
                    libc::SOCK_SEQPACKET,
                    SOCK_DCCP,
                    SOCK_PACKET,
                ] {
                    socket.push(
                        SeccompRule::new(vec![
                            domain(family).map_err(error)?,
                            kind(k).map_err(error)?,
                        ])
                        .map_err(error)?,
                    );
                }
                socket.push(
                    SeccompRule::new(vec![
                        domain(family).map_err(error)?,
                        protocol(SeccompCmpOp::Ne, 0).map_err(error)?,
                        protocol(SeccompCmpOp::Ne, libc::IPPROTO_TCP).map_err(error)?,
                    ])
                    .map_err(error)?,
                );
            }
            // And no family but local sockets, netlink (the host's own addresses) and IP:
            // packet sockets, SMC, RDS, TIPC, vsock, Bluetooth, … are refused by number.
            let family = |op: SeccompCmpOp, f: i32| {
                SeccompCondition::new(0, SeccompCmpArgLen::Dword, op, f as u64)
            };
            for (low, high) in [
                (libc::AF_INET + 1, libc::AF_INET6 - 1),
                (libc::AF_INET6 + 1, libc::AF_NETLINK - 1),
            ] {
                socket.push(
                    SeccompRule::new(vec![
                        family(SeccompCmpOp::Ge, low).map_err(error)?,
                        family(SeccompCmpOp::Le, high).map_err(error)?,
                    ])
                    .map_err(error)?,
                );
            }
            socket.push(
                SeccompRule::new(vec![
                    family(SeccompCmpOp::Gt, libc::AF_NETLINK).map_err(error)?
                ])
                .map_err(error)?,
            );
        }
        if seal.no_unix {
            socket.push(
                SeccompRule::new(vec![domain(libc::AF_UNIX).map_err(error)?]).map_err(error)?,
            );
            rules.insert(
                libc::SYS_socketpair,
                vec![SeccompRule::new(vec![
                    domain(libc::AF_UNIX).map_err(error)?,
                    kind(libc::SOCK_DGRAM).map_err(error)?,
                ])
                .map_err(error)?],
            );
        }
        rules.insert(libc::SYS_socket, socket);
        let arch = std::env::consts::ARCH
            .try_into()
            .map_err(|_| format!("no seccomp filter for {}", std::env::consts::ARCH))?;
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
            arch,
        )
        .map_err(error)?;
        filter.try_into().map_err(error)
    }

    /// A filter refusing every call of the x32 ABI (x86_64 numbers with bit 30 set), with
    /// EPERM: the table of [`filter`] names each call by its x86_64 number only.
    fn no_x32() -> BpfProgram {
        use seccompiler::sock_filter;
        const LD_W_ABS: u16 = 0x20;
        const JEQ_K: u16 = 0x15;
        const JGE_K: u16 = 0x35;
        const RET_K: u16 = 0x06;
        const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
        const X32_SYSCALL_BIT: u32 = 0x4000_0000;
        const RET_ALLOW: u32 = 0x7fff_0000;
        const RET_ERRNO: u32 = 0x0005_0000;
        let op = |code, jt, jf, k| sock_filter { code, jt, jf, k };
        vec![
            // seccomp_data.arch, then .nr
            op(LD_W_ABS, 0, 0, 4),
            op(JEQ_K, 0, 3, AUDIT_ARCH_X86_64),
            op(LD_W_ABS, 0, 0, 0),
            op(JGE_K, 0, 1, X32_SYSCALL_BIT),
            op(RET_K, 0, 0, RET_ERRNO | nix::libc::EPERM as u32),
            op(RET_K, 0, 0, RET_ALLOW),
        ]
    }

    impl Prepared {
        /// Applies the seal to the calling process: `no_new_privs`, the Landlock domain,
        /// the capabilities dropped when asked, then the seccomp filter (last, since it
        /// would refuse nothing the steps before it need). Called in the child between
        /// fork and exec of a single-threaded keeper.
        pub fn enforce(&mut self) -> std::io::Result<Taken> {
            let landlock = match self.ruleset.take() {
                Some(ruleset) => match ruleset.restrict_self() {
                    Ok(status) => match status.ruleset {
                        RulesetStatus::FullyEnforced => "enforced",
                        RulesetStatus::PartiallyEnforced => "partly enforced",
                        RulesetStatus::NotEnforced => "not enforced",
                    },
                    Err(e) => return Err(std::io::Error::other(format!("Landlock: {e}"))),
                },
                None => {
                    nix::sys::prctl::set_no_new_privs().map_err(std::io::Error::from)?;
                    "not available"
                }
            };
            if self.drop_capabilities {
                drop_capabilities()?;
            }
            for filter in std::iter::once(&self.filter).chain(&self.x32) {
                seccompiler::apply_filter(filter)
                    .map_err(|e| std::io::Error::other(format!("seccomp: {e}")))?;
            }
            Ok(Taken {
                landlock_abi: self.abi,
                landlock,
                seccomp: true,
            })
        }
    }

    /// Every capability gone, from every set and the bounding set, so a worker of root
    /// cannot take one back (the kernel's own checks on uid 0 still hold, and Landlock
    /// holds whoever it is).
    fn drop_capabilities() -> std::io::Result<()> {
        use nix::libc;
        for cap in 0..64 {
            // SAFETY: prctl with integer arguments; an unknown capability answers EINVAL.
            let r = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
            if r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
                break;
            }
        }
        #[repr(C)]
        struct Header {
            version: u32,
            pid: i32,
        }
        #[repr(C)]
        #[derive(Default, Clone, Copy)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        let mut header = Header {
            version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
            pid: 0,
        };
        let data = [Data::default(); 2];
        // SAFETY: capset with a version-3 header and its two data words, all zero.
        let r = unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // Ambient capabilities would survive exec; none are kept.
        // SAFETY: prctl with integer arguments.
        unsafe {
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
                0,
                0,
            )
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seal_round_trips_through_the_keepers_command_line() {
        let seal = Seal {
            read: vec!["/".into(), "/usr/lib".into()],
            write: vec!["/work/wt".into()],
            tcp_ports: Some(vec![3128, 8080]),
            no_udp: true,
            no_unix: true,
            drop_capabilities: true,
        };
        let args = seal.to_args();
        let mut back = Seal::default();
        let mut it = args.into_iter();
        while let Some(flag) = it.next() {
            assert!(back.parse_arg(&flag, &mut || it.next()).unwrap(), "{flag}");
        }
        assert_eq!(back, seal);
    }

    #[test]
    fn a_seal_option_without_its_value_or_with_a_bad_port_is_an_error() {
        let mut seal = Seal::default();
        assert!(seal.parse_arg("--seal-read", &mut || None).is_err());
        assert!(seal
            .parse_arg("--seal-tcp", &mut || Some("80,http".into()))
            .is_err());
        assert_eq!(seal.parse_arg("--grace", &mut || None), Ok(false));
    }
}
