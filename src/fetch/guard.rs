//! The SSRF guard: which addresses the crawler may connect to.
//!
//! A crawler fetches URLs chosen by strangers; without a guard, a link or a
//! redirect to `http://169.254.169.254/` or `http://10.0.0.1/admin` turns
//! it into a proxy into the operator's network. Every address is checked
//! where it is used: each resolved address of each hop at connect time (in
//! the resolver), and IP-literal URLs (which skip the resolver) before the
//! request. IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible and NAT64
//! (`64:ff9b::/96`) IPv6 forms are checked as the IPv4 address they carry.
//! Decimal, octal and hex IPv4 spellings need no care here: WHATWG URL
//! parsing turns them into dotted form before anything connects.
//!
//! `[fetch] deny_addresses` lists the denied ranges (by default loopback,
//! RFC 1918, link-local including cloud metadata, CGNAT, multicast,
//! unspecified, broadcast, and their IPv6 counterparts);
//! `[fetch] allow_addresses` lists exceptions that win over the deny list.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// A denied address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ssrf guard: {ip} is in the denied range {range}")]
pub struct SsrfDenied {
    /// The address (as written or resolved).
    pub ip: IpAddr,
    /// The deny-list entry it fell in.
    pub range: IpNet,
}

/// Deny and allow lists.
#[derive(Debug, Clone, Default)]
pub struct AddressPolicy {
    deny: Vec<IpNet>,
    allow: Vec<IpNet>,
}

impl AddressPolicy {
    /// A policy denying `deny` except `allow`.
    pub fn new(deny: &[IpNet], allow: &[IpNet]) -> Self {
        AddressPolicy {
            deny: deny.to_vec(),
            allow: allow.to_vec(),
        }
    }

    /// Checks one address.
    pub fn check(&self, ip: IpAddr) -> Result<(), SsrfDenied> {
        let forms = [Some(ip), embedded_v4(ip).map(IpAddr::V4)];
        let forms = forms.iter().flatten();
        if forms
            .clone()
            .any(|f| self.allow.iter().any(|n| n.contains(f)))
        {
            return Ok(());
        }
        for form in forms {
            if let Some(range) = self.deny.iter().find(|n| n.contains(form)) {
                return Err(SsrfDenied { ip, range: *range });
            }
        }
        Ok(())
    }
}

/// The IPv4 address an IPv6 address carries, if it is a mapped,
/// compatible or NAT64 form.
fn embedded_v4(ip: IpAddr) -> Option<Ipv4Addr> {
    let IpAddr::V6(v6) = ip else { return None };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = v6.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    // NAT64 well-known prefix 64:ff9b::/96.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(tail);
    }
    // Deprecated IPv4-compatible ::a.b.c.d (but not :: and ::1 themselves).
    if s[..6] == [0; 6] && v6 != Ipv6Addr::UNSPECIFIED && v6 != Ipv6Addr::LOCALHOST {
        return Some(tail);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn policy(allow: &[&str]) -> AddressPolicy {
        let config = Config::defaults();
        let allow: Vec<IpNet> = allow.iter().map(|a| a.parse().unwrap()).collect();
        AddressPolicy::new(&config.fetch.deny_addresses, &allow)
    }

    fn denied(p: &AddressPolicy, ip: &str) -> bool {
        p.check(ip.parse().unwrap()).is_err()
    }

    #[test]
    fn default_deny_list_covers_private_ranges_in_every_form() {
        let p = policy(&[]);
        for ip in [
            "127.0.0.1",
            "127.0.0.3",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "224.0.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::7f00:1",
            "64:ff9b::a9fe:a9fe",
            "::127.0.0.1",
        ] {
            assert!(denied(&p, ip), "{ip} must be denied");
        }
        for ip in [
            "93.184.216.34",
            "1.1.1.1",
            "172.32.0.1",
            "2606:4700::1111",
            "::ffff:1.1.1.1",
        ] {
            assert!(!denied(&p, ip), "{ip} must be allowed");
        }
    }

    #[test]
    fn allow_list_wins_but_only_for_what_it_names() {
        let p = policy(&["127.0.0.1/32"]);
        assert!(!denied(&p, "127.0.0.1"));
        assert!(
            !denied(&p, "::ffff:127.0.0.1"),
            "mapped form of an allowed address"
        );
        assert!(denied(&p, "127.0.0.3"));
        assert!(denied(&p, "::ffff:127.0.0.3"));
        let err = p.check("127.0.0.3".parse().unwrap()).unwrap_err();
        assert_eq!(err.range.to_string(), "127.0.0.0/8");
    }

    #[test]
    fn url_parsing_canonicalises_ip_spellings() {
        for raw in [
            "http://2130706435/",
            "http://0x7f000003/",
            "http://0177.0.0.3/",
            "http://127.1.0x3/",
        ] {
            let url = url::Url::parse(raw).unwrap();
            assert!(
                matches!(url.host(), Some(url::Host::Ipv4(ip)) if ip == Ipv4Addr::new(127, 0, 0, 3) || ip == Ipv4Addr::new(127, 1, 0, 3)),
                "{raw} -> {url}"
            );
        }
    }
}
