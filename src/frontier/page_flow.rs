//! A fetched page's processing, one step at a time: read the body (parse
//! the HTML, read the sitemap, or nothing), archive it and offer its links
//! (both at once), settle the URL's record, note its removal, wait until
//! what was archived is durable, complete the entry.
//!
//! Archiving and admitting run side by side ([`PageStep::ArchiveAndAdmit`]):
//! the links are what the host's next requests are made of (a host whose
//! only known page was this one has nothing else to ask for), so they do
//! not wait behind the archive's queue, which a burst of pages fills. A
//! page found through those links and fetched before this one's records
//! are written is still judged against this one's payload: this page's
//! digest claim is taken before it archives, and a claim of the same
//! digest waits for it ([`crate::dedup::exact`]).
//!
//! The host actor runs the steps (each a message to another actor); this
//! machine says which comes next, as a value, so the order and what a
//! rerun skips are decided in one place and tested without actors. A task
//! whose step failed (the store down, the archive's disk full) runs again
//! later with the same [`PageFlow`], kept in its [`super::host::Job`]: it
//! starts over at [`PageStep::Read`] (reading is pure and its findings are
//! not kept) and skips what stuck on an earlier run, so a page is never
//! archived twice, its links never offered twice, its `removed` event never
//! written twice. One exception, on purpose: records that could not be
//! made durable (the fsync failed) are lost to a power cut, so the page is
//! archived again on the rerun.

/// One step of a page's processing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageStep {
    /// Parse the HTML or read the sitemap, as the response's plan says.
    Read,
    /// Archive the page's record and offer its links, side by side (what
    /// succeeded of the two is kept if the other fails).
    ArchiveAndAdmit,
    /// Archive the page's record (dedup verdict, WARC, event).
    Archive,
    /// Offer the links found to the frontier.
    Admit,
    /// Settle the URL's record: its next visit, or its removal.
    Settle,
    /// Write the `removed` event of a URL that leaves the crawl.
    NoteRemoval,
    /// Wait until the archived records are durable.
    AwaitDurable,
    /// Record the entry completed.
    Complete,
}

/// Where a page's processing stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageFlow {
    /// The step this run is at; `None` before the run's first step.
    at: Option<PageStep>,
    /// This run's read found a record to archive.
    record: bool,
    /// This run's settling removes the URL.
    removes: bool,
    /// Archived on this or an earlier run (and not lost since).
    archived: bool,
    /// That archive wrote records to wait for before completing.
    durable_wait: bool,
    /// Links offered on this or an earlier run.
    admitted: bool,
    /// The `removed` event written on this or an earlier run.
    removal_noted: bool,
    /// The entry completed: nothing is left.
    completed: bool,
}

impl PageFlow {
    /// A page not processed yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The next step, or `None` once the entry is completed.
    pub fn next(&self) -> Option<PageStep> {
        use PageStep::*;
        if self.completed {
            return None;
        }
        Some(match self.at {
            None => Read,
            Some(Read) if self.record && !self.archived && !self.admitted => ArchiveAndAdmit,
            Some(Read) if self.record && !self.archived => Archive,
            Some(Read | Archive) if !self.admitted => Admit,
            Some(Read | Archive | Admit | ArchiveAndAdmit) => Settle,
            Some(Settle) if self.removes && !self.removal_noted => NoteRemoval,
            Some(Settle | NoteRemoval) if self.durable_wait => AwaitDurable,
            Some(Settle | NoteRemoval | AwaitDurable) => Complete,
            Some(Complete) => return None,
        })
    }

    /// Read is done; `record`: there is a record to archive.
    pub fn read(&mut self, record: bool) {
        self.at = Some(PageStep::Read);
        self.record = record;
    }

    /// Archive is done; `durable_wait`: it wrote records to wait for.
    pub fn archived(&mut self, durable_wait: bool) {
        self.at = Some(PageStep::Archive);
        self.archived = true;
        self.durable_wait = durable_wait;
    }

    /// Admit is done.
    pub fn admitted(&mut self) {
        self.at = Some(PageStep::Admit);
        self.admitted = true;
    }

    /// Settle is done; `removes`: the URL leaves the crawl.
    pub fn settled(&mut self, removes: bool) {
        self.at = Some(PageStep::Settle);
        self.removes = removes;
    }

    /// NoteRemoval is done.
    pub fn removal_noted(&mut self) {
        self.at = Some(PageStep::NoteRemoval);
        self.removal_noted = true;
    }

    /// AwaitDurable is done: the records are durable.
    pub fn durable(&mut self) {
        self.at = Some(PageStep::AwaitDurable);
    }

    /// AwaitDurable failed: the records may be lost, so the rerun archives
    /// the page again.
    pub fn durable_failed(&mut self) {
        self.archived = false;
        self.durable_wait = false;
    }

    /// Complete is done.
    pub fn completed(&mut self) {
        self.at = Some(PageStep::Complete);
        self.completed = true;
    }

    /// A step failed: the next run starts over, skipping what stuck.
    pub fn rerun(&mut self) {
        self.at = None;
        self.record = false;
        self.removes = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PageStep::*;

    /// A page's world: what the fakes of the other actors saw.
    #[derive(Debug, Default)]
    struct World {
        /// Records archived and still there (not lost with an fsync).
        kept_archives: u32,
        /// Archives whose records were lost.
        lost_archives: u32,
        admissions: u32,
        removals: u32,
        completions: u32,
        /// An archived record not yet waited for.
        waiting: bool,
        /// The entry completed while a record still waited for durability.
        completed_before_durable: bool,
        steps: Vec<PageStep>,
    }

    /// Runs `flow` once against fakes; the step numbered `fail_at` (over
    /// all runs) fails. `record`: the plan archives; `removes`: settling
    /// removes; `fsync_fails`: AwaitDurable fails when it fails.
    fn run_once(
        flow: &mut PageFlow,
        world: &mut World,
        counter: &mut usize,
        fail_at: &[usize],
        page: (bool, bool),
    ) -> bool {
        let (record, removes) = page;
        while let Some(step) = flow.next() {
            world.steps.push(step);
            let fails = fail_at.contains(counter);
            let even = *counter % 2 == 0;
            *counter += 1;
            if fails {
                if step == ArchiveAndAdmit && even {
                    // One half failed: the links went in, the archive not.
                    world.admissions += 1;
                    flow.admitted();
                }
                if step == AwaitDurable {
                    flow.durable_failed();
                    world.waiting = false;
                    world.kept_archives -= 1;
                    world.lost_archives += 1;
                }
                flow.rerun();
                return false;
            }
            match step {
                Read => flow.read(record),
                Archive => {
                    world.kept_archives += 1;
                    world.waiting = true;
                    flow.archived(true);
                }
                Admit => {
                    world.admissions += 1;
                    flow.admitted();
                }
                ArchiveAndAdmit => {
                    world.kept_archives += 1;
                    world.waiting = true;
                    flow.archived(true);
                    world.admissions += 1;
                    flow.admitted();
                }
                Settle => flow.settled(removes),
                NoteRemoval => {
                    world.removals += 1;
                    flow.removal_noted();
                }
                AwaitDurable => {
                    world.waiting = false;
                    flow.durable();
                }
                Complete => {
                    world.completions += 1;
                    world.completed_before_durable |= world.waiting;
                    flow.completed();
                }
            }
        }
        true
    }

    fn process(fail_at: &[usize], page: (bool, bool)) -> World {
        let mut flow = PageFlow::new();
        let mut world = World::default();
        let mut counter = 0;
        for _ in 0..100 {
            if run_once(&mut flow, &mut world, &mut counter, fail_at, page) {
                return world;
            }
        }
        panic!("never completed: {world:?}");
    }

    #[test]
    fn a_page_runs_its_steps_in_order() {
        let world = process(&[], (true, false));
        assert_eq!(
            world.steps,
            [Read, ArchiveAndAdmit, Settle, AwaitDurable, Complete]
        );
        let removed = process(&[], (true, true));
        assert_eq!(
            removed.steps,
            [
                Read,
                ArchiveAndAdmit,
                Settle,
                NoteRemoval,
                AwaitDurable,
                Complete
            ]
        );
        // Nothing to archive (a type not kept): nothing to wait for.
        let bare = process(&[], (false, false));
        assert_eq!(bare.steps, [Read, Admit, Settle, Complete]);
    }

    #[test]
    fn whatever_fails_a_page_is_archived_admitted_and_removed_once() {
        // Every failure pattern of up to two failed steps, over pages that
        // archive or not and are removed or not.
        for page in [(true, false), (true, true), (false, false), (false, true)] {
            for first in 0..12 {
                for second in first + 1..20 {
                    for fails in [vec![first], vec![first, second]] {
                        let world = process(&fails, page);
                        let why = format!("page {page:?}, failing steps {fails:?}: {world:?}");
                        assert_eq!(world.completions, 1, "{why}");
                        assert_eq!(world.steps.last(), Some(&Complete), "{why}");
                        assert_eq!(world.kept_archives, u32::from(page.0), "{why}");
                        assert_eq!(world.admissions, 1, "{why}");
                        assert_eq!(world.removals, u32::from(page.1), "{why}");
                        assert!(!world.completed_before_durable, "{why}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_lost_fsync_archives_the_page_again_and_nothing_else_twice() {
        // Run 1: Read, ArchiveAndAdmit, Settle, AwaitDurable (fails).
        let world = process(&[3], (true, false));
        assert_eq!((world.kept_archives, world.lost_archives), (1, 1));
        assert_eq!(world.admissions, 1);
        assert_eq!(
            world.steps[4..],
            [Read, Archive, Settle, AwaitDurable, Complete]
        );
    }

    #[test]
    fn a_half_failed_archive_and_admission_redoes_only_the_half_that_failed() {
        // Step 1 (ArchiveAndAdmit at an odd count: both halves fail).
        let both = process(&[1], (true, false));
        assert_eq!(both.steps[2..4], [Read, ArchiveAndAdmit]);
        // Counted from 1, ArchiveAndAdmit is step 2 (even: the links went
        // in, the archive did not).
        let mut flow = PageFlow::new();
        let (mut world, mut counter) = (World::default(), 1);
        assert!(!run_once(
            &mut flow,
            &mut world,
            &mut counter,
            &[2],
            (true, false)
        ));
        assert_eq!(world.admissions, 1);
        assert!(run_once(
            &mut flow,
            &mut world,
            &mut counter,
            &[],
            (true, false)
        ));
        assert_eq!(
            world.steps[2..],
            [Read, Archive, Settle, AwaitDurable, Complete]
        );
        assert_eq!((world.admissions, world.kept_archives), (1, 1));
    }

    #[test]
    fn a_completed_flow_has_nothing_left() {
        let mut flow = PageFlow::new();
        flow.read(false);
        flow.admitted();
        flow.settled(false);
        assert_eq!(flow.next(), Some(Complete));
        flow.completed();
        assert_eq!(flow.next(), None);
    }
}
