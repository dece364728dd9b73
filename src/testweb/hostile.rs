//! `hostile.test`: the synthetic web's hostile server behaviours.
//!
//! Its root page links to every mode, so a crawl seeded there meets them
//! all:
//! - `/ssrf`: links to a canary address in every spelling (dotted, decimal,
//!   hex, octal, IPv4-mapped IPv6, a host name overridden to it), and
//!   `/redirect-canary*`, redirects to it; a correct crawler never connects;
//! - `/loop/a` ⇄ `/loop/b`: a redirect loop; `/chain/0` → … → `/chain/9`: a
//!   chain longer than the redirect limit;
//! - `/stall`: no headers for 30 s; `/silent-body`: headers, one chunk,
//!   then silence; `/slow-body`: a chunk every 300 ms, forever;
//! - `/endless`: a body that never ends; `/big`: 100 MB;
//! - `/reset`: the connection dies in the middle of the body;
//! - `/gzip-bomb`: 40 MB of HTML in 40 KB of gzip, with a link to
//!   `/after-bomb` at its start; `/brotli-bomb`: 64 MB in a few KB of
//!   brotli, linking to `/after-brotli-bomb`;
//! - `/many-links`: 200,000 links; `/mislabelled` (windows-1251 declared
//!   UTF-8), `/bad-utf8`, `/malformed`: each still links to an `/after-…`
//!   page;
//! - `/deep-nesting` (100,000 nested `<div>`s) and `/many-attributes` (one
//!   tag with 100,000 attributes): markup that would take html5ever's tree
//!   builder seconds to minutes; each links to an `/after-…` page before
//!   it and a `/past-…` page after it;
//! - `/data.bin`: not HTML (though it holds a link, never followed).

use std::net::SocketAddr;
use std::time::Duration;

use actix_web::HttpResponse;

use super::server::not_found;
use bytes::Bytes;
use futures_util::stream;

/// The host name of the hostile server.
pub const HOST: &str = "hostile.test";

/// Paths the root page links to.
pub const PATHS: &[&str] = &[
    "/ssrf",
    "/redirect-canary",
    "/redirect-canary-name",
    "/loop/a",
    "/chain/0",
    "/stall",
    "/silent-body",
    "/slow-body",
    "/endless",
    "/big",
    "/reset",
    "/gzip-bomb",
    "/brotli-bomb",
    "/many-links",
    "/mislabelled",
    "/bad-utf8",
    "/malformed",
    "/deep-nesting",
    "/many-attributes",
    "/data.bin",
];

/// Links on `/many-links`.
pub const MANY_LINKS: usize = 200_000;

/// Nested `<div>`s on `/deep-nesting`.
pub const DEEP_NESTING: usize = 100_000;

/// Attributes of the one tag on `/many-attributes`.
pub const MANY_ATTRIBUTES: usize = 100_000;

/// Hops of `/chain/N`.
pub const CHAIN: u32 = 10;

/// The canary's host name (map it to the canary address in `[dns]
/// overrides`).
pub const CANARY_HOST: &str = "canary.test";

/// The canary URLs `/ssrf` links to, for a canary at `canary`.
pub fn canary_links(canary: SocketAddr) -> Vec<String> {
    let port = canary.port();
    let SocketAddr::V4(v4) = canary else {
        return vec![format!("http://{canary}/literal")];
    };
    let ip = *v4.ip();
    let n = u32::from(ip);
    let [a, b, c, d] = ip.octets();
    vec![
        format!("http://{ip}:{port}/literal"),
        format!("http://{n}:{port}/decimal"),
        format!("http://0x{n:x}:{port}/hex"),
        format!("http://0{a:o}.{b}.{c}.{d}:{port}/octal"),
        format!("http://[::ffff:{ip}]:{port}/mapped"),
        format!(
            "http://[::ffff:{:x}:{:x}]:{port}/mapped-hex",
            n >> 16,
            n & 0xffff
        ),
        format!("http://{CANARY_HOST}:{port}/name"),
    ]
}

/// Where the hostile host points its links.
#[derive(Debug, Clone, Copy, Default)]
pub struct Targets {
    /// The SSRF canary.
    pub canary: Option<SocketAddr>,
    /// The raw protocol-violation server ([`super::raw`]).
    pub raw: Option<SocketAddr>,
}

/// The response to `path` on the hostile host.
pub fn respond(path: &str, targets: Targets) -> HttpResponse {
    let canary = targets.canary;
    let html = |body: String| {
        HttpResponse::Ok()
            .content_type("text/html; charset=utf-8")
            .body(format!("<html><body>{body}</body></html>"))
    };
    let redirect = |to: String| {
        HttpResponse::Found()
            .insert_header(("Location", to))
            .finish()
    };
    let links = |urls: &[String]| -> String {
        urls.iter()
            .map(|u| format!("<a href=\"{u}\">x</a>\n"))
            .collect()
    };
    match path {
        "/" => {
            let mut urls: Vec<String> = PATHS.iter().map(|p| p.to_string()).collect();
            if let Some(raw) = targets.raw {
                let base = format!("http://{}:{}", super::raw::HOST, raw.port());
                urls.extend(super::raw::PATHS.iter().map(|p| format!("{base}{p}")));
            }
            html(links(&urls))
        }
        "/ssrf" => html(canary.map(|c| links(&canary_links(c))).unwrap_or_default()),
        "/redirect-canary" => match canary {
            Some(c) => redirect(format!("http://{c}/redirected")),
            None => not_found(),
        },
        "/redirect-canary-name" => match canary {
            Some(c) => redirect(format!("http://{CANARY_HOST}:{}/redirected", c.port())),
            None => not_found(),
        },
        "/gzip-bomb" => HttpResponse::Ok()
            .content_type("text/html")
            .insert_header(("Content-Encoding", "gzip"))
            .body(gzip_bomb()),
        "/brotli-bomb" => HttpResponse::Ok()
            .content_type("text/html")
            .insert_header(("Content-Encoding", "br"))
            .body(brotli_bomb()),
        "/many-links" => {
            let mut body = String::with_capacity(MANY_LINKS * 24);
            for n in 0..MANY_LINKS {
                body.push_str(&format!("<a href=\"/l/{n}\">{n}</a>"));
            }
            html(body)
        }
        // Declared UTF-8, written in windows-1251.
        "/mislabelled" => HttpResponse::Ok()
            .content_type("text/html; charset=utf-8")
            .body(&b"<html><body>\xcf\xf0\xe8\xe2\xe5\xf2 <a href=\"/after-mislabelled\">x</a></body></html>"[..]),
        "/bad-utf8" => HttpResponse::Ok()
            .content_type("text/html")
            .body(&b"<html><body>\xff\xfe\xc3\x28 <a href=\"/after-bad-utf8\">x</a>\xed\xa0\x80</body></html>"[..]),
        "/malformed" => html("<table><tr><td><a href=/after-malformed>x<div><p></a></table></td><b><i></b></i><a href='/after-malformed-2".into()),
        "/deep-nesting" => html(format!(
            "<a href=\"/after-deep-nesting\">x</a>{}<a href=\"/past-deep-nesting\">y</a>",
            "<div>".repeat(DEEP_NESTING)
        )),
        "/many-attributes" => html(format!(
            "<a href=\"/after-many-attributes\">x</a><div{}><a href=\"/past-many-attributes\">y</a></div>",
            (0..MANY_ATTRIBUTES).map(|i| format!(" a{i}")).collect::<String>()
        )),
        "/data.bin" => HttpResponse::Ok()
            .content_type("application/octet-stream")
            .body(&b"\x00\x01<a href=\"/never-followed\">binary</a>"[..]),
        "/loop/a" => redirect("/loop/b".into()),
        "/loop/b" => redirect("/loop/a".into()),
        "/stall" | "/silent-body" | "/slow-body" | "/endless" | "/big" | "/reset" => {
            body_mode(path)
        }
        _ => match path
            .strip_prefix("/chain/")
            .and_then(|n| n.parse::<u32>().ok())
        {
            Some(n) if n + 1 < CHAIN => redirect(format!("/chain/{}", n + 1)),
            Some(_) => html("end of the chain".into()),
            None => not_found(),
        },
    }
}

/// 40 MB of HTML (a link, then spaces) in about 40 KB of gzip.
fn gzip_bomb() -> Bytes {
    use std::io::Write;
    static BOMB: std::sync::OnceLock<Bytes> = std::sync::OnceLock::new();
    BOMB.get_or_init(|| {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let _ = enc.write_all(b"<html><body><a href=\"/after-bomb\">next</a>");
        let spaces = vec![b' '; 1 << 20];
        for _ in 0..40 {
            let _ = enc.write_all(&spaces);
        }
        Bytes::from(enc.finish().unwrap_or_default())
    })
    .clone()
}

/// 64 MB of HTML (a link, then spaces) in a few KB of brotli.
fn brotli_bomb() -> Bytes {
    use std::io::Write;
    static BOMB: std::sync::OnceLock<Bytes> = std::sync::OnceLock::new();
    BOMB.get_or_init(|| {
        let mut enc = brotli::CompressorWriter::new(Vec::new(), 1 << 16, 5, 22);
        let _ = enc.write_all(b"<html><body><a href=\"/after-brotli-bomb\">next</a>");
        let spaces = vec![b' '; 1 << 20];
        for _ in 0..64 {
            let _ = enc.write_all(&spaces);
        }
        Bytes::from(enc.into_inner())
    })
    .clone()
}

type Chunk = Result<Bytes, std::io::Error>;

/// The streaming modes.
fn body_mode(path: &str) -> HttpResponse {
    let chunk = Bytes::from(vec![b'a'; 64 * 1024]);
    let streaming = |s: stream::BoxStream<'static, Chunk>| {
        HttpResponse::Ok().content_type("text/html").streaming(s)
    };
    match path {
        "/stall" => streaming(Box::pin(stream::once(async {
            actix_rt::time::sleep(Duration::from_secs(30)).await;
            Ok::<_, std::io::Error>(Bytes::from_static(b"too late"))
        }))),
        "/silent-body" => streaming(Box::pin(stream::unfold(0u32, |n| async move {
            if n > 0 {
                actix_rt::time::sleep(Duration::from_secs(30)).await;
            }
            Some((Ok(Bytes::from_static(b"<html>")), n + 1))
        }))),
        "/slow-body" => streaming(Box::pin(stream::unfold((), |()| async {
            actix_rt::time::sleep(Duration::from_millis(300)).await;
            Some((Ok(Bytes::from_static(b"<p>drip</p>")), ()))
        }))),
        "/endless" => streaming(Box::pin(stream::repeat_with(move || Ok(chunk.clone())))),
        "/big" => {
            let chunks = (100 << 20) / chunk.len();
            streaming(Box::pin(stream::iter(
                (0..chunks).map(move |_| Ok(chunk.clone())),
            )))
        }
        _ => {
            // "/reset": some bytes, then the connection breaks.
            let parts: Vec<Chunk> = vec![
                Ok(Bytes::from_static(b"<html><body>partial")),
                Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "reset",
                )),
            ];
            streaming(Box::pin(stream::iter(parts)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canary_links_all_name_the_canary() {
        let canary: SocketAddr = "127.0.0.3:4242".parse().unwrap();
        for link in canary_links(canary) {
            let url = url::Url::parse(&link).unwrap();
            assert_eq!(url.port(), Some(4242), "{link}");
            let host = url.host_str().unwrap();
            assert!(
                ["127.0.0.3", "[::ffff:7f00:3]", CANARY_HOST].contains(&host),
                "{link} parses to {host}"
            );
        }
    }
}
