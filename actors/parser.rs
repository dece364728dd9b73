//! ParserPool: CPU-bound HTML and sitemap parsing on a SyncArbiter.
//!
//! Parsing is a large CPU cost per page, so it runs on its own threads
//! (one per core by default), never on the async executor. Only plain
//! [`ParsedPage`] data leaves a thread: the default reader keeps no tree,
//! and the tree reader's DOM (scraper's, not `Send`) is built and dropped
//! inside the thread. The payload digest (SHA-256) of a page is
//! computed here too, for the same reason. Each page's parse is bounded
//! ([`ParseLimits`]): a page cut short still yields what was read before the
//! cut, and the cut is counted by reason.

use std::sync::Arc;

use actix::prelude::*;

use super::messages::{DigestPayload, Parse, ParseSitemap, Parsed};
use crate::config::ParseConfig;
use crate::fetch::decode::decode_body;
use crate::metrics::Metrics;
use crate::parse::charset::decode_html;
use crate::parse::{parse_html, ParseLimits, ParsedPage};
use crate::sitemap::read_sitemap;

/// One parser thread.
pub struct ParserPool {
    /// Bounds of one page's parse.
    limits: ParseLimits,
    /// Largest decoded body read (a compressed body is decoded up to it).
    max_decoded: usize,
    metrics: Arc<Metrics>,
}

impl ParserPool {
    /// Starts `config.threads` parser threads (0 = one per core), reading
    /// bodies decoded up to `max_decoded` bytes.
    pub fn start(
        config: &ParseConfig,
        max_decoded: usize,
        metrics: Arc<Metrics>,
    ) -> Addr<ParserPool> {
        let threads = if config.threads == 0 {
            std::thread::available_parallelism().map_or(2, |n| n.get())
        } else {
            config.threads
        };
        let limits = ParseLimits::from(config);
        SyncArbiter::start(threads, move || ParserPool {
            limits: limits.clone(),
            max_decoded,
            metrics: metrics.clone(),
        })
    }
}

impl Actor for ParserPool {
    type Context = SyncContext<Self>;
}

impl Handler<Parse> for ParserPool {
    type Result = MessageResult<Parse>;

    fn handle(&mut self, msg: Parse, _: &mut Self::Context) -> Self::Result {
        let _timer = self.metrics.parse_duration.start_timer();
        let digest = crate::warc::payload_sha256(&msg.body);
        MessageResult(Parsed {
            page: self.parse(&msg),
            digest,
        })
    }
}

impl Handler<DigestPayload> for ParserPool {
    type Result = MessageResult<DigestPayload>;

    fn handle(&mut self, msg: DigestPayload, _: &mut Self::Context) -> Self::Result {
        MessageResult(crate::warc::payload_sha256(&msg.0))
    }
}

impl ParserPool {
    fn parse(&self, msg: &Parse) -> ParsedPage {
        let body = match decode_body(&msg.body, msg.content_encoding.as_deref(), self.max_decoded) {
            Ok(decoded) => decoded.bytes,
            Err(err) => {
                tracing::debug!(url = %msg.url, error = %err, "cannot decode the body; no links read");
                return ParsedPage::default();
            }
        };
        let (html, _) = decode_html(&body, msg.content_type.as_deref());
        let mut page = parse_html(&html, &msg.url, &self.limits);
        page.mime_detected = crate::parse::sniff::decoded_type(&body);
        if let Some(cut) = page.truncated {
            self.metrics
                .parse_cuts
                .with_label_values(&[cut.reason.as_str()])
                .inc();
            tracing::debug!(url = %msg.url, reason = %cut.reason, parsed_bytes = cut.parsed_bytes,
                html_bytes = html.len(), "parse stopped at a bound; the rest of the page is archived unread");
        }
        page
    }
}

impl Handler<ParseSitemap> for ParserPool {
    type Result = MessageResult<ParseSitemap>;

    fn handle(&mut self, msg: ParseSitemap, _: &mut Self::Context) -> Self::Result {
        MessageResult(read_sitemap(
            &msg.body,
            msg.content_encoding.as_deref(),
            msg.limits,
        ))
    }
}
