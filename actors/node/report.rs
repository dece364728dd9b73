//! The crawl report (`src/report`): the archive's fold of the events it
//! wrote, with the frontier of the partitions held here.

use super::*;
use crate::actors::messages::{GetReport, GetReportBook, ListHosts};
use crate::report::CrawlReport;

impl Handler<GetReport> for Node {
    type Result = ResponseFuture<CrawlReport>;

    /// A copy of the report so far, and the hosts with the most URLs
    /// queued in every partition held here.
    fn handle(&mut self, _: GetReport, ctx: &mut Self::Context) -> Self::Result {
        let report = self
            .report
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .snapshot();
        let listing = ctx.address().send(ListHosts(CrawlReport::frontier_query()));
        Box::pin(async move {
            match listing.await {
                Ok(page) => report.with_frontier(page),
                Err(_) => report,
            }
        })
    }
}

impl Handler<GetReportBook> for Node {
    type Result = MessageResult<GetReportBook>;

    fn handle(&mut self, _: GetReportBook, _: &mut Self::Context) -> Self::Result {
        MessageResult(self.report.clone())
    }
}
