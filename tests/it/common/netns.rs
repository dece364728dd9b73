//! Separate hosts on one machine: network namespaces joined by a switch,
//! made by the test and removed when it ends.
//!
//! A lab is a "switch" namespace holding a Linux bridge, one namespace per
//! host (its own address, and nothing but the lab's subnet to talk to) and
//! one leg from the test's own namespace, where the test serves what every
//! host reaches (the synthetic web, the S3 server). A host is cut off from
//! everything by taking its switch port down, and healed by bringing it up.
//!
//! A host's UDP can be dropped on its own ([`Lab::block_udp`], nftables
//! in its namespace), leaving TCP open.
//!
//! The subnet is in 198.18.0.0/15, the range RFC 2544 sets aside for
//! benchmarking networks: no real host has such an address. Making a lab
//! needs root (CAP_NET_ADMIN) and `ip` from iproute2.

use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// Labs made by this process so far (each takes a subnet of its own).
static LABS: AtomicU32 = AtomicU32::new(0);

/// A set of hosts in namespaces of their own.
pub struct Lab {
    /// Prefix of every name the lab makes (namespaces, interfaces).
    tag: String,
    /// The subnet's third octet: 198.18.`net`.0/24.
    net: u8,
    hosts: usize,
}

impl Lab {
    /// Whether labs can be made here: root, and `ip netns` works.
    pub fn available() -> bool {
        let root = unsafe { libc::geteuid() } == 0;
        root && Command::new("ip")
            .args(["netns", "list"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// A lab of `hosts` hosts. Panics if it cannot be made (see
    /// [`Lab::available`]).
    pub fn new(hosts: usize) -> Lab {
        let n = LABS.fetch_add(1, Ordering::SeqCst);
        let pid = std::process::id();
        // Distinct per process and per lab, so concurrent tests (and runs)
        // do not meet; interface names stay within 15 bytes.
        // 1..=249: 198.18.250.0/24 is the cluster demo's
        // (scripts/cluster-demo.sh), 198.18.251.0/24 the compose file's.
        let net = ((pid + n * 37) % 249 + 1) as u8;
        let tag = format!("tl{:x}{n}", pid % 0xfffff);
        let lab = Lab { tag, net, hosts };
        lab.build();
        lab
    }

    fn switch(&self) -> String {
        format!("{}sw", self.tag)
    }

    /// Host `i`'s namespace.
    pub fn namespace(&self, i: usize) -> String {
        format!("{}h{i}", self.tag)
    }

    /// The test's own address in the lab (where it serves).
    pub fn test_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(198, 18, self.net, 254)
    }

    /// Host `i`'s address.
    pub fn addr(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::new(198, 18, self.net, 11 + i as u8)
    }

    /// The lab's subnet, in CIDR.
    pub fn subnet(&self) -> String {
        format!("198.18.{}.0/24", self.net)
    }

    /// A command run in host `i`'s namespace (`ip netns exec` execs it:
    /// the child's pid is the program's own, for signals).
    pub fn command(&self, i: usize, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.namespace(i)]).arg(program);
        cmd
    }

    /// Cuts host `i` off from every other (peers, store, web).
    pub fn cut(&self, i: usize) {
        self.port(i, "down");
    }

    /// Undoes [`Lab::cut`].
    pub fn heal(&self, i: usize) {
        self.port(i, "up");
    }

    /// Drops every UDP datagram host `i` receives (nftables in its
    /// namespace): gossip is cut while TCP (the bridge, the store, the
    /// web) still passes, as a firewall missing one port does.
    pub fn block_udp(&self, i: usize) {
        let ns = self.namespace(i);
        ip(&["netns", "exec", &ns, "nft", "add", "table", "inet", "lab"]);
        ip(&[
            "netns",
            "exec",
            &ns,
            "nft",
            "add",
            "chain",
            "inet",
            "lab",
            "input",
            "{ type filter hook input priority 0 ; }",
        ]);
        ip(&[
            "netns", "exec", &ns, "nft", "add", "rule", "inet", "lab", "input", "meta", "l4proto",
            "udp", "drop",
        ]);
    }

    /// Undoes [`Lab::block_udp`].
    pub fn unblock_udp(&self, i: usize) {
        let ns = self.namespace(i);
        ip(&[
            "netns", "exec", &ns, "nft", "delete", "table", "inet", "lab",
        ]);
    }

    fn port(&self, i: usize, state: &str) {
        let port = format!("{}p{i}", self.tag);
        ip(&["-n", &self.switch(), "link", "set", &port, state]);
    }

    fn build(&self) {
        let sw = self.switch();
        let bridge = "br0";
        ip(&["netns", "add", &sw]);
        ip(&["-n", &sw, "link", "add", bridge, "type", "bridge"]);
        ip(&["-n", &sw, "link", "set", bridge, "up"]);
        // The test's leg: one end here, the other a port of the switch.
        let leg = format!("{}t", self.tag);
        let leg_port = format!("{}pt", self.tag);
        ip(&[
            "link", "add", &leg, "type", "veth", "peer", "name", &leg_port,
        ]);
        ip(&["link", "set", &leg_port, "netns", &sw]);
        ip(&["-n", &sw, "link", "set", &leg_port, "master", bridge, "up"]);
        let test_cidr = format!("{}/24", self.test_addr());
        ip(&["addr", "add", &test_cidr, "dev", &leg]);
        ip(&["link", "set", &leg, "up"]);
        for i in 0..self.hosts {
            let ns = self.namespace(i);
            let nic = format!("{}e{i}", self.tag);
            let port = format!("{}p{i}", self.tag);
            ip(&["netns", "add", &ns]);
            ip(&["link", "add", &nic, "type", "veth", "peer", "name", &port]);
            ip(&["link", "set", &nic, "netns", &ns]);
            ip(&["link", "set", &port, "netns", &sw]);
            ip(&["-n", &sw, "link", "set", &port, "master", bridge, "up"]);
            let cidr = format!("{}/24", self.addr(i));
            ip(&["-n", &ns, "addr", "add", &cidr, "dev", &nic]);
            ip(&["-n", &ns, "link", "set", &nic, "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
        }
    }
}

impl Drop for Lab {
    /// Removes every namespace; their interfaces go with them (the test's
    /// leg too: a veth dies with its peer).
    fn drop(&mut self) {
        for i in 0..self.hosts {
            let _ = quiet(&["netns", "del", &self.namespace(i)]);
        }
        let _ = quiet(&["netns", "del", &self.switch()]);
        let _ = quiet(&["link", "del", &format!("{}t", self.tag)]);
    }
}

/// Runs `ip args`; panics with its message if it fails.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn quiet(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
