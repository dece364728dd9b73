//! Where a URL came from: the page it was found on (`via`) and the hops
//! from its seed (the hop path), carried from discovery through the queue
//! to the WARC records and events of its fetch.
//!
//! The hop path is Heritrix's: one letter a hop, the seed's path empty.
//! trawl follows three kinds of hop:
//! - `L`: a navigation link (`<a href>`, `<area href>`);
//! - `R`: a redirect (`Location` of a 3xx);
//! - `M`: a manifest: a sitemap listed in robots.txt, and a URL listed in
//!   a sitemap.
//!
//! trawl fetches no embeds (images, scripts, styles: Heritrix's `E`), so no
//! path holds one. A path keeps its last [`MAX_HOPS`] letters (a crawl
//! without a depth limit could otherwise grow one without bound); `depth`
//! still counts every hop.

use std::sync::Arc;

/// The longest hop path kept: the last hops of a longer one.
pub const MAX_HOPS: usize = 64;

/// One hop from a URL to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hop {
    /// A navigation link on a page.
    Link,
    /// A redirect's target.
    Redirect,
    /// A sitemap listed by robots.txt, or a URL a sitemap lists.
    Manifest,
}

impl Hop {
    /// Its letter in a hop path (Heritrix's).
    pub fn letter(self) -> char {
        match self {
            Hop::Link => 'L',
            Hop::Redirect => 'R',
            Hop::Manifest => 'M',
        }
    }

    /// Its name in events (`link`, `redirect`, `sitemap`).
    pub fn name(self) -> &'static str {
        match self {
            Hop::Link => "link",
            Hop::Redirect => "redirect",
            Hop::Manifest => "sitemap",
        }
    }

    fn from_letter(letter: char) -> Option<Hop> {
        match letter {
            'L' => Some(Hop::Link),
            'R' => Some(Hop::Redirect),
            'M' => Some(Hop::Manifest),
            _ => None,
        }
    }
}

/// How a URL was reached: the URL it was found on (none for a seed) and
/// the hop path from its seed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Provenance {
    /// The URL whose fetch found it (a page, a redirect, robots.txt or a
    /// sitemap); `None` for a seed.
    pub via: Option<Arc<str>>,
    /// The hops from the seed, oldest first.
    pub hops: HopPath,
}

impl Provenance {
    /// A seed's: no via, no hops.
    pub fn seed() -> Self {
        Provenance::default()
    }

    /// The provenance of a URL found from `via` (whose own provenance is
    /// `self`) by a hop of `hop`.
    pub fn then(&self, via: &Arc<str>, hop: Hop) -> Self {
        Provenance {
            via: Some(via.clone()),
            hops: self.hops.then(hop),
        }
    }

    /// How the URL was reached last: `seed` or the last hop's name.
    pub fn how(&self) -> &'static str {
        self.hops.last().map_or("seed", Hop::name)
    }
}

/// A hop path: one letter a hop ([`Hop::letter`]), at most [`MAX_HOPS`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HopPath(String);

impl HopPath {
    /// The path one `hop` further.
    pub fn then(&self, hop: Hop) -> Self {
        let mut path = String::with_capacity((self.0.len() + 1).min(MAX_HOPS));
        let keep = self.0.len().min(MAX_HOPS - 1);
        path.push_str(&self.0[self.0.len() - keep..]);
        path.push(hop.letter());
        HopPath(path)
    }

    /// The last hop, if any (a seed has none).
    pub fn last(&self) -> Option<Hop> {
        self.0.chars().last().and_then(Hop::from_letter)
    }

    /// The letters.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A path read back from a store or a peer: its known letters, the
    /// last [`MAX_HOPS`] of them (anything else is dropped, never trusted
    /// into an event).
    pub fn from_letters(letters: &str) -> Self {
        let kept: String = letters
            .chars()
            .filter(|c| Hop::from_letter(*c).is_some())
            .collect();
        let start = kept.len().saturating_sub(MAX_HOPS);
        HopPath(kept[start..].to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_grows_a_letter_a_hop_and_names_its_last_hop() {
        let seed = Provenance::seed();
        assert_eq!((seed.via.as_deref(), seed.hops.as_str()), (None, ""));
        assert_eq!(seed.how(), "seed");
        let page: Arc<str> = Arc::from("http://a.test/");
        let linked = seed.then(&page, Hop::Link);
        let moved: Arc<str> = Arc::from("http://a.test/old");
        let redirected = linked.then(&moved, Hop::Redirect);
        assert_eq!(redirected.hops.as_str(), "LR");
        assert_eq!(redirected.via.as_deref(), Some("http://a.test/old"));
        assert_eq!(redirected.how(), "redirect");
        let listed = seed.then(&page, Hop::Manifest).then(&page, Hop::Manifest);
        assert_eq!((listed.hops.as_str(), listed.how()), ("MM", "sitemap"));
    }

    #[test]
    fn a_long_path_keeps_its_last_hops() {
        let mut path = HopPath::default();
        for i in 0..MAX_HOPS + 10 {
            path = path.then(if i % 2 == 0 { Hop::Link } else { Hop::Redirect });
        }
        assert_eq!(path.as_str().len(), MAX_HOPS);
        assert_eq!(path.last(), Some(Hop::Redirect));
        assert!(path.as_str().ends_with("LR"));
    }

    #[test]
    fn a_path_read_back_keeps_only_known_letters() {
        assert_eq!(HopPath::from_letters("LLRM").as_str(), "LLRM");
        assert_eq!(HopPath::from_letters("L\"}x\nR").as_str(), "LR");
        let long = "L".repeat(MAX_HOPS * 2) + "R";
        let read = HopPath::from_letters(&long);
        assert_eq!(read.as_str().len(), MAX_HOPS);
        assert_eq!(read.last(), Some(Hop::Redirect));
    }
}
