//! ParserPool: CPU-bound HTML and sitemap parsing on a SyncArbiter.
//!
//! Parsing is the largest CPU cost per page, so it runs on its own threads
//! (one per core by default), never on the async executor. scraper's DOM is
//! not `Send`: it is built and dropped inside the thread and only plain
//! [`ParsedPage`] data leaves.

use actix::prelude::*;

use super::messages::{Parse, ParseSitemap};
use crate::fetch::decode::decode_body;
use crate::parse::charset::decode_html;
use crate::parse::{parse_html, prefix_at_char_boundary, ParsedPage};
use crate::sitemap::parse_sitemap;

/// One parser thread.
pub struct ParserPool {
    max_links: usize,
    /// Largest decoded body read (a compressed body is decoded up to it).
    max_decoded: usize,
    /// Largest HTML text parsed: the DOM grows with it (about 16 bytes of
    /// tree per byte of markup for a page of bare links).
    max_html: usize,
}

impl ParserPool {
    /// Starts `threads` parser threads (0 = one per core).
    pub fn start(
        threads: usize,
        max_links: usize,
        max_decoded: usize,
        max_html: usize,
    ) -> Addr<ParserPool> {
        let threads = if threads == 0 {
            std::thread::available_parallelism().map_or(2, |n| n.get())
        } else {
            threads
        };
        SyncArbiter::start(threads, move || ParserPool {
            max_links,
            max_decoded,
            max_html,
        })
    }
}

impl Actor for ParserPool {
    type Context = SyncContext<Self>;
}

impl Handler<Parse> for ParserPool {
    type Result = MessageResult<Parse>;

    fn handle(&mut self, msg: Parse, _: &mut Self::Context) -> Self::Result {
        let body = match decode_body(&msg.body, msg.content_encoding.as_deref(), self.max_decoded) {
            Ok(decoded) => decoded.bytes,
            Err(err) => {
                tracing::debug!(url = %msg.url, error = %err, "cannot decode the body; no links read");
                return MessageResult(ParsedPage::default());
            }
        };
        let (html, _) = decode_html(&body, msg.content_type.as_deref());
        let html = prefix_at_char_boundary(&html, self.max_html);
        MessageResult(parse_html(html, &msg.url, self.max_links))
    }
}

impl Handler<ParseSitemap> for ParserPool {
    type Result = MessageResult<ParseSitemap>;

    fn handle(&mut self, msg: ParseSitemap, _: &mut Self::Context) -> Self::Result {
        MessageResult(parse_sitemap(&msg.body, msg.limits))
    }
}
