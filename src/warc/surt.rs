//! SURT keys, as pywb and the CDXJ indexers compute them.
//!
//! A replay tool finds a capture by the SURT (Sort-friendly URI Reordering
//! Transform) of its URL, so trawl's index must produce exactly the key
//! pywb computes for the same URL, or the capture is never found. pywb
//! uses the Python `surt` package with its default canonicaliser (Google's
//! rules, then the Internet Archive's); this is a port of what that does,
//! step by step: percent-decoding then minimal re-encoding, lower-case
//! host without `www.`/`wwwN.`, default port dropped (other ports kept:
//! `test,site0001:8080)/`), `.`/`..` segments resolved, lower-case path
//! and query, session ids removed, query arguments sorted, fragment and
//! user info dropped, host labels reversed and joined with commas, `)`
//! closing the authority.
//!
//! No crate on crates.io ports these rules faithfully (the one Rust SURT
//! crate keeps the fragment and skips the canonicaliser), hence this file;
//! `tests/it/cdxj.rs` checks it against the Python package on tricky URLs.
//!
//! Known differences from the Python package, on inputs trawl never
//! archives (its URLs are already in WHATWG normal form): octal IPv4
//! hosts are left as they are, and non-ASCII hosts are converted with
//! UTS-46 rather than IDNA 2003.

use std::sync::LazyLock;

use regex::bytes::Regex;

/// The SURT key of `url`: what pywb looks a capture up by.
pub fn surt(url: &str) -> String {
    if url.is_empty() {
        return "-".into();
    }
    if url.starts_with("filedesc") {
        return url.to_owned();
    }
    match Parts::parse(url) {
        Some(parts) => parts.canonical().key(),
        // The Python indexer falls back to the URL itself when `surt`
        // raises (an unparseable port, say).
        None => url.to_owned(),
    }
}

/// A URL split as the `surt` package's `handyurl` splits it.
#[derive(Debug)]
struct Parts {
    scheme: Vec<u8>,
    host: Option<Vec<u8>>,
    port: Option<u16>,
    path: Option<Vec<u8>>,
    query: Option<Vec<u8>>,
}

impl Parts {
    /// Splits `url` (RFC 2396's regex, as `handyurl.parse`); `None` when
    /// the port is not a number.
    fn parse(url: &str) -> Option<Parts> {
        let trimmed = url.trim_matches(|c: char| c.is_ascii_whitespace() || c == '\x0b');
        let mut url: Vec<u8> = trimmed
            .bytes()
            .filter(|b| !matches!(b, b'\n' | b'\r' | b'\t'))
            .collect();
        if !has_scheme(&url) {
            url.splice(0..0, b"http://".iter().copied());
        }
        strip_repeated_protocols(&mut url);
        let (scheme, rest) = split_at_byte(&url, b':');
        let scheme = scheme.to_vec();
        let rest = &rest[1..];
        let rest = rest.split(|&b| b == b'#').next().unwrap_or_default();
        let (before_query, query) = match rest.iter().position(|&b| b == b'?') {
            Some(i) => (&rest[..i], Some(&rest[i + 1..])),
            None => (rest, None),
        };
        let (netloc, path) = match before_query.strip_prefix(b"//") {
            Some(after) => {
                let end = after.iter().position(|&b| b == b'/').unwrap_or(after.len());
                (&after[..end], &after[end..])
            }
            None => (&b""[..], before_query),
        };
        let mut netloc = netloc;
        while let Some(n) = netloc.strip_suffix(b":") {
            netloc = n;
        }
        let (mut host, port) = host_and_port(netloc)?;
        let mut path = (!path.is_empty()).then(|| path.to_vec());
        if scheme.starts_with(b"http") && host.is_none() {
            // `http:////host/path`: the host is the first segment.
            if let Some(p) = &path {
                let trimmed: Vec<u8> = p.iter().copied().skip_while(|&b| b == b'/').collect();
                let (h, rest) = split_at_byte(&trimmed, b'/');
                host = (!h.is_empty()).then(|| h.to_vec());
                let mut new_path = b"/".to_vec();
                new_path.extend_from_slice(rest.get(1..).unwrap_or_default());
                path = Some(new_path);
            }
        }
        Some(Parts {
            scheme,
            host,
            port,
            path,
            query: query.filter(|q| !q.is_empty()).map(<[u8]>::to_vec),
        })
    }

    /// Google's canonicaliser, then the Internet Archive's.
    fn canonical(mut self) -> Parts {
        self.query = self.query.map(|q| escape_once(&unescape_repeatedly(&q)));
        if let Some(host) = self.host.take() {
            self.host = Some(canonical_host(&host));
        }
        let path = unescape_repeatedly(self.path.as_deref().unwrap_or_default());
        let path = if self.host.is_some() {
            normalize_path(&path)
        } else {
            path
        };
        let path = escape_once(&path);
        // The Internet Archive's rules.
        if let Some(host) = &mut self.host {
            host.make_ascii_lowercase();
            strip_www(host);
        }
        let default_port = match self.scheme.to_ascii_lowercase().as_slice() {
            b"http" => Some(80),
            b"https" => Some(443),
            _ => None,
        };
        if self.port.is_some() && self.port == default_port {
            self.port = None;
        }
        let mut path = strip_path_session_id(path.to_ascii_lowercase());
        if path.len() > 1 && path.ends_with(b"/") {
            path.pop();
        }
        self.path = (!path.is_empty()).then_some(path);
        self.query = self.query.and_then(|q| {
            let q = strip_query_session_id(q).to_ascii_lowercase();
            let q = alpha_reorder_query(&q);
            (!q.is_empty()).then_some(q)
        });
        self
    }

    /// The SURT form, without the scheme.
    fn key(&self) -> String {
        let mut out = Vec::new();
        match &self.host {
            Some(host) => {
                let mut labels: Vec<&[u8]> = host.split(|&b| b == b'.').collect();
                labels.reverse();
                out.extend_from_slice(&labels.join(&b","[..]));
                if let Some(port) = self.port {
                    out.extend_from_slice(format!(":{port}").as_bytes());
                }
                out.push(b')');
            }
            None => {
                out.extend_from_slice(&self.scheme);
                out.push(b':');
            }
        }
        match &self.path {
            Some(path) => out.extend_from_slice(path),
            None if self.query.is_some() => out.push(b'/'),
            None => {}
        }
        if let Some(query) = &self.query {
            out.push(b'?');
            out.extend_from_slice(query);
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// `bytes` split before the first `sep` (the second part keeps it), or
/// all of `bytes` and nothing.
fn split_at_byte(bytes: &[u8], sep: u8) -> (&[u8], &[u8]) {
    let i = bytes.iter().position(|&b| b == sep).unwrap_or(bytes.len());
    bytes.split_at(i)
}

/// Whether `url` starts with a scheme (`[a-zA-Z][a-zA-Z0-9+-.]*:`).
fn has_scheme(url: &[u8]) -> bool {
    let Some(colon) = url.iter().position(|&b| b == b':') else {
        return false;
    };
    let scheme = &url[..colon];
    scheme.first().is_some_and(u8::is_ascii_alphabetic)
        && scheme
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// `http://https://host/` → `https://host/`: keeps the last of repeated
/// `http(s)://` prefixes.
fn strip_repeated_protocols(url: &mut Vec<u8>) {
    let mut start = 0;
    let mut last = None;
    loop {
        let rest = &url[start..];
        let len = if rest.starts_with(b"http://") {
            7
        } else if rest.starts_with(b"https://") {
            8
        } else {
            break;
        };
        last = Some(start);
        start += len;
    }
    if let Some(last) = last {
        url.drain(..last);
    }
}

/// The host (lower-case, without brackets) and port of a netloc, as
/// Python's `urlsplit` reads them; `None` when the port is not a number.
#[allow(clippy::type_complexity)]
fn host_and_port(netloc: &[u8]) -> Option<(Option<Vec<u8>>, Option<u16>)> {
    let hostport = match netloc.iter().rposition(|&b| b == b'@') {
        Some(i) => &netloc[i + 1..],
        None => netloc,
    };
    let (host, port) = if let Some(rest) = hostport.strip_prefix(b"[") {
        let end = rest.iter().position(|&b| b == b']').unwrap_or(rest.len());
        let after = rest.get(end + 1..).unwrap_or_default();
        (&rest[..end], after.strip_prefix(b":"))
    } else {
        let (h, p) = split_at_byte(hostport, b':');
        (h, p.get(1..))
    };
    let port = match port {
        Some(p) if !p.is_empty() => {
            let text = std::str::from_utf8(p).ok()?;
            if !text.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some(text.parse::<u16>().ok()?).filter(|&p| p != 0)
        }
        _ => None,
    };
    let host = (!host.is_empty()).then(|| host.to_ascii_lowercase());
    Some((host, port))
}

/// Google's host rules: decoded, IDNA, no empty labels at the ends, an
/// IPv4 address in dotted form, lower-case, minimally escaped.
fn canonical_host(host: &[u8]) -> Vec<u8> {
    let mut host = unescape_repeatedly(host);
    if !host.is_ascii() {
        let text = String::from_utf8_lossy(&host).into_owned();
        if let Ok(url) = url::Url::parse(&format!("http://{text}/")) {
            if let Some(ascii) = url.host_str() {
                host = ascii.as_bytes().to_vec();
            }
        }
    }
    let text = String::from_utf8_lossy(&host).replace("..", ".");
    let text = text.trim_matches('.');
    match ipv4(text) {
        Some(ip) => ip.into_bytes(),
        None => escape_once(text.to_ascii_lowercase().as_bytes()),
    }
}

/// An all-digit host or a dotted decimal one, read as `inet_aton` reads
/// it (the last part fills the remaining bytes).
fn ipv4(host: &str) -> Option<String> {
    if !host.is_empty() && host.bytes().all(|b| b.is_ascii_digit()) {
        let n = host.bytes().fold(0u64, |n, b| {
            (n.wrapping_mul(10) + u64::from(b - b'0')) & 0xffff_ffff_ffff
        });
        return Some(std::net::Ipv4Addr::from((n & 0xffff_ffff) as u32).to_string());
    }
    let parts: Vec<&str> = host.split('.').collect();
    let decimal = parts.len() <= 4
        && parts[0]
            .bytes()
            .next()
            .is_some_and(|b| (b'1'..=b'9').contains(&b))
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if !decimal {
        return None;
    }
    let nums: Vec<u64> = parts
        .iter()
        .map(|p| p.parse::<u64>().ok())
        .collect::<Option<_>>()?;
    let (last, head) = nums.split_last()?;
    if head.iter().any(|&n| n > 255) || *last >= 1u64 << (8 * (4 - head.len())) {
        return None;
    }
    let mut value = *last;
    for (i, &n) in head.iter().enumerate() {
        value |= n << (8 * (3 - i));
    }
    Some(std::net::Ipv4Addr::from(value as u32).to_string())
}

/// Drops a leading `www.` or `wwwN.`.
fn strip_www(host: &mut Vec<u8>) {
    let Some(rest) = host.strip_prefix(b"www") else {
        return;
    };
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if rest.get(digits) == Some(&b'.') {
        host.drain(..3 + digits + 1);
    }
}

/// Resolves `.` and `..` segments and drops empty ones (keeping a
/// trailing slash), as Google's canonicaliser does.
fn normalize_path(path: &[u8]) -> Vec<u8> {
    if path.is_empty() {
        return b"/".to_vec();
    }
    let mut kept: Vec<&[u8]> = Vec::new();
    for segment in path.split(|&b| b == b'/').skip(1) {
        match segment {
            b"." => {}
            b".." => {
                if kept.pop().is_none() {
                    kept.push(segment);
                }
            }
            _ => kept.push(segment),
        }
    }
    let mut out = b"/".to_vec();
    if let Some((last, head)) = kept.split_last() {
        for segment in head.iter().filter(|s| !s.is_empty()) {
            out.extend_from_slice(segment);
            out.push(b'/');
        }
        out.extend_from_slice(last);
    }
    out
}

/// Percent-decodes until nothing changes.
fn unescape_repeatedly(input: &[u8]) -> Vec<u8> {
    let mut current = input.to_vec();
    loop {
        let next = unescape(&current);
        if next == current {
            return current;
        }
        current = next;
    }
}

/// One pass of percent-decoding; malformed escapes stay as they are.
fn unescape(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        let hex = |b: Option<&u8>| b.and_then(|&b| (b as char).to_digit(16));
        if input[i] == b'%' {
            if let (Some(hi), Some(lo)) = (hex(input.get(i + 1)), hex(input.get(i + 2))) {
                out.push((hi * 16 + lo) as u8);
                i += 3;
                continue;
            }
        }
        out.push(input[i]);
        i += 1;
    }
    out
}

/// Escapes control bytes, space, `#`, `%` and non-ASCII: everything
/// Python's `quote` escapes with the `surt` package's safe set.
fn escape_once(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    for &b in input {
        if b <= b' ' || b == b'#' || b == b'%' || b >= 0x7f {
            out.extend_from_slice(format!("%{b:02X}").as_bytes());
        } else {
            out.push(b);
        }
    }
    out
}

/// Session ids in ASP.NET paths.
static PATH_SESSION_IDS: LazyLock<[Regex; 2]> = LazyLock::new(|| {
    [
        Regex::new(r"(?i-u)^(.*/)(\((?:[a-z]\([0-9a-z]{24}\))+\)/)([^\?]+\.aspx.*)$"),
        Regex::new(r"(?i-u)^(.*/)(\([0-9a-z]{24}\)/)([^\?]+\.aspx.*)$"),
    ]
    .map(|r| r.expect("valid regex"))
});

/// Session-id query arguments (Java, PHP, ASP, ColdFusion).
static QUERY_SESSION_IDS: LazyLock<[Regex; 5]> = LazyLock::new(|| {
    [
        r"(?i-u)^(.*)(?:jsessionid=[0-9a-zA-Z]{32})(?:&(.*))?$",
        r"(?i-u)^(.*)(?:phpsessid=[0-9a-zA-Z]{32})(?:&(.*))?$",
        r"(?i-u)^(.*)(?:sid=[0-9a-zA-Z]{32})(?:&(.*))?$",
        r"(?i-u)^(.*)(?:ASPSESSIONID[a-zA-Z]{8}=[a-zA-Z]{24})(?:&(.*))?$",
        r"(?i-u)^(.*)(?:cfid=[^&]+&cftoken=[^&]+)(?:&(.*))?$",
    ]
    .map(|r| Regex::new(r).expect("valid regex"))
});

fn strip_path_session_id(mut path: Vec<u8>) -> Vec<u8> {
    for re in PATH_SESSION_IDS.iter() {
        if let Some(c) = re.captures(&path) {
            path = [&c[1], &c[3]].concat();
        }
    }
    path
}

fn strip_query_session_id(mut query: Vec<u8>) -> Vec<u8> {
    for re in QUERY_SESSION_IDS.iter() {
        if let Some(c) = re.captures(&query) {
            let rest = c.get(2).map(|m| m.as_bytes()).unwrap_or_default();
            query = [&c[1], rest].concat();
        }
    }
    query
}

/// Sorts `&`-separated arguments by name, then value (a bare `name`
/// before `name=...`), keeping each argument's text.
fn alpha_reorder_query(query: &[u8]) -> Vec<u8> {
    if query.len() <= 1 {
        return query.to_vec();
    }
    let mut args: Vec<(&[u8], Option<&[u8]>)> = query
        .split(|&b| b == b'&')
        .map(|arg| match arg.iter().position(|&b| b == b'=') {
            Some(i) => (&arg[..i], Some(&arg[i + 1..])),
            None => (arg, None),
        })
        .collect();
    args.sort();
    let mut out = Vec::with_capacity(query.len());
    for (i, (name, value)) in args.iter().enumerate() {
        if i > 0 {
            out.push(b'&');
        }
        out.extend_from_slice(name);
        if let Some(value) = value {
            out.push(b'=');
            out.extend_from_slice(value);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::surt;

    /// Expected keys are what the Python `surt` package (0.3.1) answers.
    #[test]
    fn keys_match_the_python_package() {
        let cases = [
            (
                "http://site0001.test:40123/p/1.html",
                "test,site0001:40123)/p/1.html",
            ),
            (
                "http://www.Example.com/A/B/?b=2&a=1#frag",
                "com,example)/a/b?a=1&b=2",
            ),
            ("https://example.com:443/", "com,example)/"),
            ("http://example.com:80", "com,example)/"),
            ("http://127.0.0.1:8080/x", "1,0,0,127:8080)/x"),
            (
                "http://a.test/%7Euser/a%20b?q=%41",
                "test,a)/~user/a%20b?q=a",
            ),
            ("http://a.test/a/./b/../c//d/", "test,a)/a/c/d"),
            ("http://a.test/?", "test,a)/"),
            (
                "http://www2.a.test/x?jsessionid=0123456789abcdef0123456789abcdef&z=1",
                "test,a)/x?z=1",
            ),
            ("http://a.test/path;p?x=1&x", "test,a)/path;p?x&x=1"),
            ("http://user:pw@a.test/", "test,a)/"),
            ("http://a.test/é?q=ü", "test,a)/%c3%a9?q=%c3%bc"),
            ("http://[::1]:8080/x", "::1:8080)/x"),
            ("http://a.test/%zz%2541", "test,a)/%25zza"),
            ("http://a.test/a%2fb", "test,a)/a/b"),
            ("http://a.test/x?a=%26b&c", "test,a)/x?a=&b&c"),
            ("http://WWW.a.test./x", "test,a)/x"),
            ("http://a.test/x?b&a=", "test,a)/x?a=&b"),
            ("http://a.test/ x y ", "test,a)/%20x%20y"),
            ("http://www.test/", "test)/"),
            ("http://www10.site.test/", "test,site)/"),
            ("https://a.test:80/", "test,a:80)/"),
            ("http://a.test:443/", "test,a:443)/"),
            ("http://a.test/p?a=1&A=2", "test,a)/p?a=1&a=2"),
            ("a.test/x", "test,a)/x"),
            ("http://https://a.test/x", "test,a)/x"),
            ("http:////a.test/x", "test,a)/x"),
            ("http://2130706433/", "1,0,0,127)/"),
            ("http://1.2/", "2,0,0,1)/"),
            ("mailto:A@B.c", "mailto:a@b.c"),
            (
                "http://a.test/x?sid=0123456789abcdef0123456789abcdef",
                "test,a)/x",
            ),
            (
                "http://a.test/(abcdefghijklmnopqrstuvwx)/Foo.aspx",
                "test,a)/foo.aspx",
            ),
            ("", "-"),
        ];
        for (url, key) in cases {
            assert_eq!(surt(url), key, "{url}");
        }
    }

    #[test]
    fn an_unparseable_port_keeps_the_url() {
        assert_eq!(surt("http://a.test:x/"), "http://a.test:x/");
    }
}
