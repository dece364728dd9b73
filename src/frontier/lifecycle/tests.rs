use super::*;
use crate::store::StoredCopy;

const DAY_MS: u64 = 86_400_000;

fn settings() -> RecrawlSettings {
    RecrawlSettings {
        enabled: true,
        policy: RecrawlPolicy {
            min_interval: Duration::from_secs(86_400),
            max_interval: Duration::from_secs(90 * 86_400),
            default_interval: Duration::from_secs(7 * 86_400),
        },
        refresh_share: 0.5,
        change_distance: 3,
    }
}

fn ok(at_ms: u64, digest: u8) -> Observed {
    Observed {
        visit: Visit {
            at_ms,
            status: 200,
            etag: Some(format!("\"v{digest}\"")),
            last_modified: None,
            digest: Some([digest; 32]),
            simhash: None,
            copy: Some(StoredCopy {
                uri: "http://a.test/".into(),
                date: format!("date-{at_ms}"),
                record_id: format!("<urn:uuid:{at_ms}>"),
            }),
        },
        not_modified: false,
        changed: None,
    }
}

fn status(at_ms: u64, code: u16) -> Observed {
    Observed {
        visit: Visit {
            at_ms,
            status: code,
            ..Visit::default()
        },
        ..Observed::default()
    }
}

#[test]
fn a_first_fetch_records_the_visit_and_comes_due_after_the_default_interval() {
    let s = settings();
    let done = fetched(None, 2, ok(1_000, 1), 1_500, &s);
    assert_eq!(done.removed, None);
    let rec = done.record;
    assert_eq!(rec.state, UrlState::Fetched(200));
    assert_eq!(rec.depth, 2);
    assert_eq!(rec.history.visits, 0, "a first fetch compares with nothing");
    assert_eq!(rec.interval_ms, 7 * DAY_MS);
    assert_eq!(rec.next_due_ms, Some(1_500 + 7 * DAY_MS));
    let last = rec.last.unwrap();
    assert_eq!((last.status, last.etag.as_deref()), (200, Some("\"v1\"")));
    // Refreshing off: fetched once.
    let off = RecrawlSettings {
        enabled: false,
        ..s
    };
    assert_eq!(fetched(None, 0, ok(1, 1), 1, &off).record.next_due_ms, None);
}

#[test]
fn refetches_grow_the_history_and_a_304_keeps_the_copy() {
    let s = settings();
    let first = fetched(None, 0, ok(0, 1), 0, &s).record;
    let changed = Observed {
        changed: Some(true),
        ..ok(DAY_MS, 2)
    };
    let second = fetched(Some(&first), 0, changed, DAY_MS, &s).record;
    assert_eq!((second.history.visits, second.history.changes), (1, 1));
    assert_eq!(second.history.span, Duration::from_millis(DAY_MS));
    let not_modified = Observed {
        visit: Visit {
            at_ms: 3 * DAY_MS,
            status: 304,
            etag: Some("\"v2b\"".into()),
            ..Visit::default()
        },
        not_modified: true,
        changed: Some(false),
    };
    let third = fetched(Some(&second), 0, not_modified, 3 * DAY_MS, &s).record;
    assert_eq!((third.history.visits, third.history.changes), (2, 1));
    assert_eq!(third.state, UrlState::Fetched(200), "the copy's status");
    let last = third.last.unwrap();
    assert_eq!(last.digest, Some([2; 32]), "the copy on record is kept");
    assert_eq!(last.copy.unwrap().date, format!("date-{DAY_MS}"));
    assert_eq!(last.at_ms, 3 * DAY_MS);
    assert_eq!(last.etag.as_deref(), Some("\"v2b\""), "a new validator");
}

#[test]
fn two_missing_answers_in_a_row_remove_a_url_once() {
    let s = settings();
    let first = fetched(None, 0, ok(0, 1), 0, &s).record;
    let miss = fetched(Some(&first), 0, status(DAY_MS, 404), DAY_MS, &s);
    assert_eq!(miss.removed, None, "one 404 is not enough");
    assert_eq!(miss.record.misses, 1);
    assert_eq!(
        miss.record.next_due_ms,
        Some(2 * DAY_MS),
        "checked again after min_interval"
    );
    assert_eq!(miss.record.interval_ms, 7 * DAY_MS, "the interval is kept");
    let gone = fetched(
        Some(&miss.record),
        0,
        status(2 * DAY_MS, 410),
        2 * DAY_MS,
        &s,
    );
    assert_eq!(gone.removed, Some(Removal::Gone));
    assert_eq!(gone.record.state, UrlState::Gone(Removal::Gone));
    assert_eq!(gone.record.next_due_ms, None);
    assert_eq!(gone.record.removed_ms, Some(2 * DAY_MS));
    // A 404 between two 200s starts over.
    let back = fetched(Some(&miss.record), 0, ok(2 * DAY_MS, 1), 2 * DAY_MS, &s);
    assert_eq!(back.record.misses, 0);
    let again = fetched(
        Some(&back.record),
        0,
        status(3 * DAY_MS, 404),
        3 * DAY_MS,
        &s,
    );
    assert_eq!(again.removed, None);
}

#[test]
fn a_permanent_redirect_retires_the_url_and_a_temporary_one_does_not() {
    let s = settings();
    for code in [301, 308] {
        let done = fetched(None, 0, status(0, code), 0, &s);
        assert_eq!(done.removed, Some(Removal::Moved), "{code}");
        assert_eq!(done.record.next_due_ms, None);
    }
    for code in [302, 307] {
        let done = fetched(None, 0, status(0, code), 0, &s);
        assert_eq!(done.removed, None, "{code}");
        assert!(done.record.next_due_ms.is_some());
    }
}

#[test]
fn robots_txt_removes_only_urls_fetched_before() {
    let s = settings();
    let never = unfetched(None, 1, UrlState::Disallowed, 5, &s);
    assert_eq!(never.removed, None);
    assert_eq!(never.record.state, UrlState::Disallowed);
    let fetched_once = fetched(None, 0, ok(0, 1), 0, &s).record;
    let newly = unfetched(Some(&fetched_once), 0, UrlState::Disallowed, 9, &s);
    assert_eq!(newly.removed, Some(Removal::Disallowed));
    assert_eq!(newly.record.state, UrlState::Gone(Removal::Disallowed));
    // Reported once.
    let again = unfetched(Some(&newly.record), 0, UrlState::Disallowed, 10, &s);
    assert_eq!(again.removed, None);
}

#[test]
fn a_failed_refetch_keeps_the_page_in_the_crawl() {
    let s = settings();
    let page = fetched(None, 0, ok(0, 1), 0, &s).record;
    let tried = retry(
        Some(&page),
        0,
        Tries {
            failed: 2,
            throttled: 1,
        },
    );
    assert_eq!(tried.state, UrlState::RetryDue);
    assert_eq!(tried.tries.failed, 2);
    let failed = unfetched(Some(&tried), 0, UrlState::Failed, DAY_MS, &s).record;
    assert_eq!(failed.state, UrlState::Fetched(200));
    assert_eq!(failed.tries, Tries::default());
    assert_eq!(failed.last, page.last, "the copy is kept");
    assert!(failed.next_due_ms.is_some_and(|d| d > DAY_MS));
    // A URL that never got a response is simply failed.
    let fresh = unfetched(None, 0, UrlState::Failed, 0, &s).record;
    assert_eq!((fresh.state, fresh.next_due_ms), (UrlState::Failed, None));
}

#[test]
fn only_new_seeds_and_newer_lastmods_bring_a_url_back() {
    let s = settings();
    let page = fetched(None, 0, ok(1_000, 1), 1_000, &s).record;
    let link = Offer {
        seed: SeedOffer::No,
        lastmod_ms: None,
    };
    let lastmod = |ms| Offer {
        seed: SeedOffer::No,
        lastmod_ms: Some(ms),
    };
    let seed = |seed| Offer {
        seed,
        lastmod_ms: None,
    };
    assert!(!due_again(&page, link));
    assert!(!due_again(&page, lastmod(999)), "older than the fetch");
    assert!(due_again(&page, lastmod(1_001)));
    let gone = fetched(Some(&page), 0, status(2_000, 410), 2_000, &s).record;
    let gone = fetched(Some(&gone), 0, status(3_000, 410), 3_000, &s).record;
    assert!(matches!(gone.state, UrlState::Gone(_)));
    assert!(!due_again(&gone, link), "links do not bring it back");
    assert!(!due_again(&gone, lastmod(2_500)), "older than the removal");
    assert!(due_again(&gone, lastmod(3_001)));
    assert!(due_again(&gone, seed(SeedOffer::New)), "a new seed");
    assert!(
        !due_again(&gone, seed(SeedOffer::Repeated)),
        "a seed given before does not undo the removal"
    );
    // A reseed: a seed given before, as changed now.
    let reseed = Offer {
        seed: SeedOffer::Repeated,
        lastmod_ms: Some(3_500),
    };
    assert!(due_again(&gone, reseed));
    assert!(
        !due_again(&page, seed(SeedOffer::New)),
        "a fetched page waits"
    );
    let back = bring_back(gone, 4_000);
    assert_eq!(back.state, UrlState::Fetched(410), "its last answer");
    assert_eq!((back.next_due_ms, back.misses), (Some(4_000), 0));
    assert_eq!(back.removed_ms, None);
    assert!(!due_again(&UrlRecord::new(UrlState::Queued, 0), lastmod(5)));
}

#[test]
fn change_is_judged_by_digest_text_and_status() {
    let prev = fetched(None, 0, ok(0, 1), 0, &settings())
        .record
        .last
        .unwrap();
    let with_hash = Visit {
        simhash: Some(0),
        ..prev.clone()
    };
    assert_eq!(judge_change(None, 200, false, &[1; 32], None, 3), None);
    assert_eq!(
        judge_change(Some(&prev), 304, true, &[0; 32], None, 3),
        Some(false)
    );
    assert_eq!(
        judge_change(Some(&prev), 200, false, &[1; 32], None, 3),
        Some(false)
    );
    assert_eq!(
        judge_change(Some(&prev), 200, false, &[2; 32], None, 3),
        Some(true)
    );
    assert_eq!(
        judge_change(Some(&with_hash), 200, false, &[2; 32], Some(0b11), 3),
        Some(false),
        "a footer timestamp"
    );
    assert_eq!(
        judge_change(Some(&prev), 404, false, &[1; 32], None, 3),
        Some(true)
    );
}
