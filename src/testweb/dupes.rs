//! The repeating web: duplicates and endless URL spaces, for the dedup and
//! trap defences. `dupes.test/` links to the root of each:
//!
//! - `mirror-a.test`, `mirror-b.test`: the same [`MIRROR_PAGES`] pages,
//!   byte for byte (exact duplicates: one copy stored, the other revisits);
//! - `template.test`: [`TEMPLATE_PAGES`] pages of one long template that
//!   differ only in a visitor counter at the end (near-duplicates);
//! - `session.test`: one item linked under session-ID variants
//!   (`?sid=`, `?PHPSESSID=`, `;jsessionid=`): one identity, one fetch;
//! - `calendar.test`: `/cal/YYYY/MM/` links to the next month, forever;
//! - `loop.test`: every page `/a/…/` links to `a/` below itself, forever;
//! - `sN.farm.test` for N < [`FARM_HOSTS`]: a link farm, each host linking
//!   to five others of the farm and nothing outside it;
//! - on the hub itself, pages with robots directives and a canonical link:
//!   `/xrobots` (`X-Robots-Tag: trawl: nofollow`, links to `/x-never`),
//!   `/otherbot` (`X-Robots-Tag: otherbot: nofollow`, links to
//!   `/after-otherbot`), `/noindex` (meta robots noindex, links to
//!   `/after-noindex`), `/canonical` (names `/canonical-target`).

use actix_web::HttpResponse;

use super::server::not_found;

/// The hub linking to every family.
pub const HUB: &str = "dupes.test";
/// The two mirrors.
pub const MIRRORS: [&str; 2] = ["mirror-a.test", "mirror-b.test"];
/// Pages per mirror (besides the root).
pub const MIRROR_PAGES: u32 = 5;
/// The near-duplicate host.
pub const TEMPLATE: &str = "template.test";
/// Near-duplicate pages (besides the root).
pub const TEMPLATE_PAGES: u32 = 8;
/// The session-ID host.
pub const SESSION: &str = "session.test";
/// The calendar host.
pub const CALENDAR: &str = "calendar.test";
/// The first month the calendar links to.
pub const CALENDAR_START: (i32, u32) = (2026, 1);
/// The repeating-path host.
pub const LOOP: &str = "loop.test";
/// The link farm's registrable domain.
pub const FARM_DOMAIN: &str = "farm.test";
/// Hosts of the link farm.
pub const FARM_HOSTS: u32 = 60;
/// Pages per farm host (besides the root).
pub const FARM_PAGES: u32 = 4;

/// Whether `host` is one of these.
pub fn serves(host: &str) -> bool {
    host == HUB
        || MIRRORS.contains(&host)
        || [TEMPLATE, SESSION, CALENDAR, LOOP].contains(&host)
        || farm_index(host).is_some()
}

/// The session-ID variants of one item.
pub const SESSION_VARIANTS: &[&str] = &[
    "/item?id=7&sid=a1b2",
    "/item?id=7&sid=c3d4",
    "/item?PHPSESSID=zz9&id=7",
    "/item;jsessionid=0FF1CE?id=7",
    "/item?id=7",
];

/// The response for `path_and_query` on `host` (one of [`serves`]), the
/// server listening on `port`.
pub fn respond(host: &str, path_and_query: &str, port: u16) -> HttpResponse {
    let path = path_and_query.split('?').next().unwrap_or("/");
    if host == HUB && path == "/" {
        let mut roots: Vec<String> = MIRRORS
            .iter()
            .chain([TEMPLATE, SESSION, LOOP].iter())
            .map(|h| format!("http://{h}:{port}/"))
            .collect();
        let (y, m) = CALENDAR_START;
        roots.push(format!("http://{CALENDAR}:{port}/cal/{y}/{m:02}/"));
        roots.push(format!("http://s0.{FARM_DOMAIN}:{port}/"));
        roots.extend(["/xrobots", "/otherbot", "/noindex", "/canonical"].map(String::from));
        return page("hub", &links(&roots));
    }
    if host == HUB {
        return directives(path);
    }
    if MIRRORS.contains(&host) {
        return mirror(path);
    }
    if let Some(n) = farm_index(host) {
        return farm(n, path, port);
    }
    match host {
        TEMPLATE => template(path),
        SESSION => session(path),
        CALENDAR => calendar(path),
        LOOP if path.starts_with("/a/") || path == "/" => {
            page(&format!("loop at {path}"), "<a href=\"a/\">deeper</a>")
        }
        _ => not_found(),
    }
}

/// The hub's pages with robots directives and a canonical link.
fn directives(path: &str) -> HttpResponse {
    let text = prose(31, 40);
    let with_link = |to: &str| format!("<p>{text}</p><a href=\"{to}\">next</a>");
    let x_robots = |mut response: HttpResponse, value: &'static str| {
        response.headers_mut().insert(
            actix_web::http::header::HeaderName::from_static("x-robots-tag"),
            actix_web::http::header::HeaderValue::from_static(value),
        );
        response
    };
    match path {
        "/xrobots" => x_robots(page("x-robots", &with_link("/x-never")), "trawl: nofollow"),
        "/otherbot" => x_robots(
            page("otherbot", &with_link("/after-otherbot")),
            "otherbot: nofollow",
        ),
        "/noindex" => page(
            "noindex",
            &format!(
                "<meta name=\"robots\" content=\"noindex\">{}",
                with_link("/after-noindex")
            ),
        ),
        "/canonical" => page(
            "canonical",
            &format!("<link rel=\"canonical\" href=\"/canonical-target\"><p>{text}</p>"),
        ),
        "/x-never" | "/after-otherbot" | "/after-noindex" | "/canonical-target" => {
            page(path, &format!("<p>{}</p>", prose(77, 20)))
        }
        _ => not_found(),
    }
}

fn page(title: &str, body: &str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(format!(
            "<html><head><title>{title}</title></head><body><h1>{title}</h1>{body}</body></html>"
        ))
}

fn links(urls: &[String]) -> String {
    urls.iter()
        .map(|u| format!("<a href=\"{u}\">{u}</a>\n"))
        .collect()
}

/// Both mirrors serve these exact bytes (links are relative).
fn mirror(path: &str) -> HttpResponse {
    let n = match path {
        "/" => 0,
        _ => match path
            .strip_prefix("/m/")
            .and_then(|p| p.strip_suffix(".html"))
            .and_then(|n| n.parse::<u32>().ok())
        {
            Some(n) if (1..=MIRROR_PAGES).contains(&n) => n,
            _ => return not_found(),
        },
    };
    let pages: Vec<String> = (1..=MIRROR_PAGES).map(|i| format!("/m/{i}.html")).collect();
    let text = prose(1000 + n, 120);
    page(
        &format!("mirrored page {n}"),
        &format!("<p>{text}</p>{}", links(&pages)),
    )
}

/// One long template, a counter at its very end: pages a few bits apart.
fn template(path: &str) -> HttpResponse {
    let n = match path.strip_prefix("/t/").and_then(|n| n.parse::<u32>().ok()) {
        Some(n) if n < TEMPLATE_PAGES => n,
        _ if path == "/" => {
            let pages: Vec<String> = (0..TEMPLATE_PAGES).map(|i| format!("/t/{i}")).collect();
            return page("template index", &links(&pages));
        }
        _ => return not_found(),
    };
    page(
        "a product page",
        &format!("<p>{}</p><p>visitors {}</p>", prose(7, 600), 1000 + n * 37),
    )
}

fn session(path: &str) -> HttpResponse {
    match path {
        "/" => {
            let urls: Vec<String> = SESSION_VARIANTS.iter().map(|v| v.to_string()).collect();
            page("session index", &links(&urls))
        }
        _ if path.starts_with("/item") => page("the item", &format!("<p>{}</p>", prose(99, 80))),
        _ => not_found(),
    }
}

fn calendar(path: &str) -> HttpResponse {
    let mut parts = path.trim_matches('/').split('/');
    let (Some("cal"), Some(y), Some(m)) = (parts.next(), parts.next(), parts.next()) else {
        return not_found();
    };
    let (Ok(y), Ok(m)) = (y.parse::<i32>(), m.parse::<u32>()) else {
        return not_found();
    };
    let (ny, nm) = if m >= 12 { (y + 1, 1) } else { (y, m + 1) };
    page(
        &format!("events in {y}-{m:02}"),
        &format!("<p>no events</p><a href=\"/cal/{ny}/{nm:02}/\">next month</a>"),
    )
}

/// `sN.farm.test` → N.
fn farm_index(host: &str) -> Option<u32> {
    let n = host
        .strip_suffix(FARM_DOMAIN)?
        .strip_suffix('.')?
        .strip_prefix('s')?
        .parse::<u32>()
        .ok()?;
    (n < FARM_HOSTS).then_some(n)
}

fn farm(n: u32, path: &str, port: u16) -> HttpResponse {
    let known = path == "/"
        || path
            .strip_prefix("/f/")
            .and_then(|p| p.parse::<u32>().ok())
            .is_some_and(|p| p < FARM_PAGES);
    if !known {
        return not_found();
    }
    let mut urls: Vec<String> = (0..FARM_PAGES).map(|p| format!("/f/{p}")).collect();
    urls.extend((1..=5).map(|k| {
        format!(
            "http://s{}.{FARM_DOMAIN}:{port}/",
            (n * 7 + k * 13) % FARM_HOSTS
        )
    }));
    page(
        &format!("farm {n} {path}"),
        &format!("<p>{}</p>{}", prose(5000 + n, 60), links(&urls)),
    )
}

/// `words` deterministic words from `seed`.
pub(super) fn prose(seed: u32, words: usize) -> String {
    const WORDS: &[&str] = &[
        "river", "stone", "market", "lantern", "harbour", "meadow", "copper", "violet", "engine",
        "orchard", "signal", "winter", "basket", "pillar", "thunder", "canvas", "garden", "needle",
        "marble", "summit", "ribbon", "anchor", "falcon", "timber",
    ];
    let mut state = u64::from(seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..words)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            WORDS[(state % WORDS.len() as u64) as usize]
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dedup::distance;
    use crate::parse::page_simhash;

    fn body(response: HttpResponse) -> String {
        let bytes = actix_web::body::to_bytes(response.into_body());
        let bytes = actix_rt::System::new().block_on(bytes).unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[test]
    fn template_pages_are_near_duplicates_and_mirrors_identical() {
        let hashes: Vec<u64> = (0..TEMPLATE_PAGES)
            .map(|n| page_simhash(&body(respond(TEMPLATE, &format!("/t/{n}"), 80))).unwrap())
            .collect();
        for a in &hashes {
            for b in &hashes {
                assert!(distance(*a, *b) <= 3, "{a:x} {b:x}");
            }
        }
        assert_ne!(
            body(respond(TEMPLATE, "/t/0", 80)),
            body(respond(TEMPLATE, "/t/1", 80))
        );
        assert_eq!(
            body(respond(MIRRORS[0], "/m/3.html", 80)),
            body(respond(MIRRORS[1], "/m/3.html", 80))
        );
        // Distinct families are far apart.
        let mirror = page_simhash(&body(respond(MIRRORS[0], "/m/1.html", 80))).unwrap();
        let farm = page_simhash(&body(respond("s3.farm.test", "/", 80))).unwrap();
        assert!(distance(mirror, hashes[0]) > 10 && distance(farm, mirror) > 10);
    }
}
