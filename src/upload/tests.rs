use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{Attribute, GetOptions, ObjectStore, ObjectStoreExt, PutPayload};

use sha2::Digest;

use super::*;
use crate::config::VerifyMode;

fn run<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

fn memory_target() -> (Arc<InMemory>, Target) {
    let store = Arc::new(InMemory::new());
    let target = Target::new(
        store.clone(),
        ObjectPath::from("crawl/warcs"),
        "s3://bucket/crawl/warcs/",
        true,
    );
    (store, target)
}

fn settings(part_size: usize, verify: VerifyMode) -> TransferSettings {
    TransferSettings {
        part_size,
        parts_in_flight: 2,
        verify,
    }
}

/// Bytes that differ from part to part.
fn content(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

fn whole(file: &str) -> Work {
    Work::Whole(file.to_owned())
}

fn sealed(file: &str, to: u64) -> crate::warc::Sealed {
    crate::warc::Sealed {
        file: file.to_owned(),
        to,
    }
}

#[test]
fn pending_goes_oldest_first_and_backs_off_doubling() {
    let mut p = Pending::new(Duration::from_secs(10), Duration::from_secs(25));
    let t0 = Instant::now();
    p.add("b");
    p.add("a");
    p.add("a");
    assert_eq!(p.next_ready(t0), Some(whole("a")));
    p.add("a"); // in flight: not queued twice
    assert_eq!(p.failed(&whole("a"), t0), Duration::from_secs(10));
    assert_eq!(p.failures(&whole("a")), 1);
    // "a" waits; "b" is ready.
    assert_eq!(p.next_ready(t0), Some(whole("b")));
    assert_eq!(p.next_ready(t0), None);
    assert_eq!(p.next_wake(t0), Some(Duration::from_secs(10)));
    let t1 = t0 + Duration::from_secs(10);
    assert_eq!(p.next_ready(t1), Some(whole("a")));
    assert_eq!(p.failed(&whole("a"), t1), Duration::from_secs(20));
    let t2 = t1 + Duration::from_secs(20);
    assert_eq!(p.next_ready(t2), Some(whole("a")));
    assert_eq!(p.failed(&whole("a"), t2), Duration::from_secs(25), "capped");
    assert_eq!(p.failures(&whole("a")), 3);
    p.done(&whole("b"));
    assert!(!p.is_empty());
    let t3 = t2 + Duration::from_secs(25);
    assert_eq!(p.next_ready(t3), Some(whole("a")));
    p.done(&whole("a"));
    assert_eq!(p.failures(&whole("a")), 0);
    assert!(p.is_empty());
    assert_eq!(p.next_wake(t3), None);
}

#[test]
fn a_files_segments_tile_it_from_its_start_each_range_fixed_once_queued() {
    let mut p = Pending::new(Duration::from_secs(1), Duration::from_secs(8));
    let t0 = Instant::now();
    let first = p.add_segment(&sealed("f", 100)).unwrap();
    assert_eq!(
        first,
        Work::Segment {
            file: "f".into(),
            from: 0,
            to: 100
        }
    );
    assert_eq!(p.add_segment(&sealed("f", 100)), None, "nothing new");
    assert_eq!(p.next_ready(t0), Some(first.clone()));
    p.failed(&first, t0);
    // A seal while the first segment waits to be tried again: the next
    // starts where the first ends; the first keeps its range.
    let second = p.add_segment(&sealed("f", 250)).unwrap();
    assert_eq!(
        second,
        Work::Segment {
            file: "f".into(),
            from: 100,
            to: 250
        }
    );
    assert_eq!(p.next_ready(t0), Some(second.clone()));
    p.done(&second);
    let t1 = t0 + Duration::from_secs(1);
    assert_eq!(
        p.next_ready(t1),
        Some(first.clone()),
        "the same range again"
    );
    p.done(&first);
    assert!(p.is_empty());
}

#[test]
fn a_whole_upload_supersedes_waiting_segments_and_waits_for_one_in_flight() {
    let mut p = Pending::new(Duration::from_secs(1), Duration::from_secs(8));
    let t0 = Instant::now();
    let flying = p.add_segment(&sealed("f", 100)).unwrap();
    assert_eq!(p.next_ready(t0), Some(flying.clone()));
    p.add_segment(&sealed("f", 200)).unwrap();
    p.add_segment(&sealed("g", 50)).unwrap();
    // f closes: its waiting segment is dropped, its whole upload waits for
    // the segment in flight (whose object it will delete).
    p.add("f");
    assert_eq!(p.len(), 3, "f's segment in flight, f whole, g's segment");
    assert_eq!(
        p.next_ready(t0),
        Some(Work::Segment {
            file: "g".into(),
            from: 0,
            to: 50
        })
    );
    assert_eq!(p.next_ready(t0), None, "f whole is blocked");
    assert_eq!(p.next_wake(t0), None, "no timer for what a segment blocks");
    assert_eq!(
        p.add_segment(&sealed("f", 300)),
        None,
        "covered by the whole"
    );
    // The segment in flight fails: moot now, it is not tried again.
    assert_eq!(p.failed(&flying, t0), Duration::ZERO);
    assert_eq!(p.next_ready(t0), Some(whole("f")));
    p.done(&whole("f"));
    assert_eq!(p.add_segment(&sealed("f", 400)), None, "uploaded whole");
}

#[test]
fn joining_takes_the_longest_segment_at_each_offset_and_refuses_a_gap() {
    use super::join::{plan, JoinError, Plan};
    assert_eq!(plan("f", None, &[]).unwrap(), Plan::Covered);
    assert_eq!(
        plan("f", None, &[(100, 200), (0, 100), (0, 60)]).unwrap(),
        Plan::Join {
            whole: None,
            pieces: vec![(0, 100), (100, 200)],
            len: 200
        }
    );
    // The file went up whole: its segments are only deleted.
    assert_eq!(
        plan("f", Some(200), &[(0, 100), (100, 200)]).unwrap(),
        Plan::Covered
    );
    // A join already made, and a segment put after it.
    assert_eq!(
        plan("f", Some(200), &[(0, 100), (100, 200), (200, 260)]).unwrap(),
        Plan::Join {
            whole: Some(200),
            pieces: vec![(200, 260)],
            len: 260
        }
    );
    let err = plan("f", None, &[(0, 100), (150, 200)]).unwrap_err();
    assert!(
        matches!(
            err,
            JoinError::Gap {
                at: 100,
                end: 200,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        super::join::parse_segment("00000000000000000100-00000000000000000250"),
        Some((100, 250))
    );
    assert_eq!(super::join::parse_segment("100-100"), None);
    assert_eq!(super::join::parse_segment("x-1"), None);
}

#[test]
fn segments_of_a_file_being_written_join_into_the_file_and_go_with_its_whole_upload() {
    let dir = tempfile::tempdir().unwrap();
    let data = content(10_000);
    let open = dir.path().join("f.warc.gz.open");
    let (store, target) = memory_target();
    let part = settings(1024, VerifyMode::ReadBack);
    run(async move {
        // Written up to 3,000 and sealed; then to 7,000 and sealed.
        std::fs::write(&open, &data[..3000]).unwrap();
        let one = upload_segment(
            target.clone(),
            dir.path().into(),
            "f.warc.gz".into(),
            (0, 3000),
            part.clone(),
        )
        .await
        .unwrap();
        assert_eq!(
            one.key,
            "crawl/warcs/f.warc.gz.segments/00000000000000000000-00000000000000003000"
        );
        std::fs::write(&open, &data[..8000]).unwrap();
        // Bytes written after the seal are not sent: the segment ends at it.
        upload_segment(
            target.clone(),
            dir.path().into(),
            "f.warc.gz".into(),
            (3000, 7000),
            part.clone(),
        )
        .await
        .unwrap();
        // A segment past what is on disk is refused, not padded.
        let err = upload_segment(
            target.clone(),
            dir.path().into(),
            "f.warc.gz".into(),
            (7000, 9000),
            part.clone(),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, UploadError::Mismatch { .. }), "{err}");
        // The node is lost: its segments are joined into the file as it was
        // at its last seal.
        let scratch = tempfile::tempdir().unwrap();
        let joined = join::join_file(&target, scratch.path(), "f.warc.gz", &part)
            .await
            .unwrap();
        assert_eq!((joined.bytes, joined.segments, joined.put), (7000, 2, true));
        let key = ObjectPath::from("crawl/warcs/f.warc.gz");
        let got = store.get(&key).await.unwrap().bytes().await.unwrap();
        assert_eq!(&got[..], &data[..7000]);
        let left = join::files_with_segments(&target, |_| true).await.unwrap();
        assert!(left.is_empty(), "{left:?}");
        assert!(
            std::fs::read_dir(scratch.path()).unwrap().next().is_none(),
            "scratch removed"
        );
        // The same node comes back with its disk instead: the file closes,
        // goes up whole, and its segments are deleted.
        std::fs::write(&open, &data[..3000]).unwrap();
        upload_segment(
            target.clone(),
            dir.path().into(),
            "f.warc.gz".into(),
            (0, 3000),
            part.clone(),
        )
        .await
        .unwrap();
        std::fs::rename(&open, dir.path().join("f.warc.gz")).unwrap();
        std::fs::write(dir.path().join("f.warc.gz"), &data).unwrap();
        upload_file(
            target.clone(),
            dir.path().into(),
            "f.warc.gz".into(),
            part.clone(),
        )
        .await
        .unwrap();
        assert_eq!(
            join::delete_segments(&target, "f.warc.gz").await.unwrap(),
            1
        );
        let again = join::join_file(&target, scratch.path(), "f.warc.gz", &part)
            .await
            .unwrap();
        assert_eq!((again.bytes, again.segments, again.put), (10_000, 0, false));
        let got = store.get(&key).await.unwrap().bytes().await.unwrap();
        assert_eq!(&got[..], &data[..], "a join never shortens a whole file");
    });
}

#[test]
fn a_segment_is_read_from_the_closed_file_once_the_open_one_is_renamed() {
    let dir = tempfile::tempdir().unwrap();
    let data = content(5000);
    std::fs::write(dir.path().join("f.warc.gz"), &data).unwrap();
    let (store, target) = memory_target();
    run(async move {
        let seg = upload_segment(
            target,
            dir.path().into(),
            "f.warc.gz".into(),
            (1000, 4000),
            settings(4096, VerifyMode::Size),
        )
        .await
        .unwrap();
        let got = store
            .get(&ObjectPath::from(seg.key.as_str()))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert_eq!(&got[..], &data[1000..4000]);
    });
}

#[test]
fn closed_files_are_this_nodes_finished_files_only() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "trawl-20261130120000-00001-abcd.warc.gz",
        "trawl-20261130120000-00000-abcd.warc.gz",
        "trawl-20261130120000-00002-abcd.warc.gz.open",
        "trawl-n1-20261130120000-00000-abcd.warc.gz",
        "other-20261130120000-00000-abcd.warc.gz",
        "trawl-20261130120000-00000-abcd.warc.gz.cdxj",
        "trawl-20261130120000-00003-abcd.warc.zst",
        "trawl-n10-20261130120000-00000-abcd.warc.gz",
    ] {
        std::fs::write(dir.path().join(name), b"x").unwrap();
    }
    assert_eq!(
        closed_files(dir.path(), "trawl").unwrap(),
        [
            "trawl-20261130120000-00000-abcd.warc.gz",
            "trawl-20261130120000-00001-abcd.warc.gz",
            "trawl-20261130120000-00003-abcd.warc.zst",
        ]
    );
    assert_eq!(
        closed_files(dir.path(), "trawl-n1").unwrap(),
        ["trawl-n1-20261130120000-00000-abcd.warc.gz"]
    );
}

fn record(file: &str) -> UploadRecord {
    UploadRecord {
        file: file.into(),
        location: format!("s3://b/{file}"),
        bytes: 3,
        sha256: "00".into(),
        uploaded_at: "2026-11-30T00:00:00.000Z".into(),
    }
}

#[test]
fn the_manifest_survives_reopening_and_a_torn_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("uploads.jsonl");
    let mut m = Manifest::open(&path).unwrap();
    m.record(record("a.warc.gz")).unwrap();
    m.record(record("b.warc.gz")).unwrap();
    m.announced("a.warc.gz").unwrap();
    drop(m);
    // A crash in the middle of a line.
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("{\"step\":\"uploaded\",\"file\":\"c.wa");
    std::fs::write(&path, text).unwrap();
    let mut m = Manifest::open(&path).unwrap();
    assert!(m.contains("a.warc.gz") && m.contains("b.warc.gz"));
    assert!(!m.contains("c.warc.gz"));
    assert_eq!(m.unannounced(), [record("b.warc.gz")]);
    m.announced("b.warc.gz").unwrap();
    drop(m);
    let m = Manifest::open(&path).unwrap();
    assert!(m.unannounced().is_empty());
    assert_eq!(m.uploads().count(), 2);
}

#[test]
fn a_corrupt_manifest_line_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("uploads.jsonl");
    std::fs::write(&path, "not json\n").unwrap();
    let err = Manifest::open(&path).err().unwrap();
    assert!(
        matches!(err, manifest::ManifestError::Corrupt { line: 1, .. }),
        "{err}"
    );
}

/// Uploads a file of `len` bytes; what the store holds.
fn upload_and_read(len: usize, part_size: usize, verify: VerifyMode) -> (UploadRecord, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let data = content(len);
    std::fs::write(dir.path().join("f.warc.gz"), &data).unwrap();
    let (store, target) = memory_target();
    run(async move {
        let rec = upload_file(
            target,
            dir.path().to_owned(),
            "f.warc.gz".into(),
            settings(part_size, verify),
        )
        .await
        .unwrap();
        let key = ObjectPath::from("crawl/warcs/f.warc.gz");
        let got = store.get(&key).await.unwrap();
        let sha = got
            .attributes
            .get(&Attribute::Metadata("sha256".into()))
            .map(|v| v.as_ref().to_owned());
        assert_eq!(
            sha.as_deref(),
            Some(rec.sha256.as_str()),
            "digest in metadata"
        );
        let bytes = got.bytes().await.unwrap().to_vec();
        (rec, bytes)
    })
}

#[test]
fn a_small_file_is_one_put_verified_by_reading_back() {
    let (rec, bytes) = upload_and_read(3000, 4096, VerifyMode::ReadBack);
    assert_eq!(bytes, content(3000));
    assert_eq!(rec.bytes, 3000);
    assert_eq!(rec.location, "s3://bucket/crawl/warcs/f.warc.gz");
    let sha = data_encoding::HEXLOWER.encode(&sha2::Sha256::digest(content(3000)));
    assert_eq!(rec.sha256, sha);
}

#[test]
fn a_large_file_goes_up_in_parts_whole() {
    let (rec, bytes) = upload_and_read(10_000, 1024, VerifyMode::Size);
    assert_eq!(bytes, content(10_000));
    assert_eq!(rec.bytes, 10_000);
    let (_, bytes) = upload_and_read(4096, 1024, VerifyMode::ReadBack);
    assert_eq!(bytes, content(4096), "a file of whole parts");
}

#[test]
fn a_different_object_fails_verification() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f.warc.gz"), content(100)).unwrap();
    // A store that keeps whatever was there: the object is replaced after
    // the upload by a wrapper, simulated by checking a key whose object
    // differs.
    let (store, target) = memory_target();
    let key = ObjectPath::from("crawl/warcs/f.warc.gz");
    run(async {
        store
            .put(&key, PutPayload::from(content(99)))
            .await
            .unwrap();
        let err = transfer::read_back_for_test(&target, &key, 100, "00")
            .await
            .unwrap_err();
        assert!(
            matches!(err, UploadError::Mismatch { what: "size", .. }),
            "{err}"
        );
        store
            .put(&key, PutPayload::from(content(100)))
            .await
            .unwrap();
        let err = transfer::read_back_for_test(&target, &key, 100, "00")
            .await
            .unwrap_err();
        assert!(
            matches!(err, UploadError::Mismatch { what: "sha256", .. }),
            "{err}"
        );
        let head = store
            .get_opts(
                &key,
                GetOptions {
                    head: true,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(head.meta.size, 100);
    });
}

#[test]
fn a_missing_file_is_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let (_, target) = memory_target();
    let err = run(upload_file(
        target,
        dir.path().to_owned(),
        "gone.warc.gz".into(),
        settings(1024, VerifyMode::ReadBack),
    ))
    .unwrap_err();
    assert!(matches!(err, UploadError::Missing(_)), "{err}");
}

#[test]
fn a_local_directory_target_receives_files() {
    let src = tempfile::tempdir().unwrap();
    let dst = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join("f.warc.gz"), content(5000)).unwrap();
    let url = format!("file://{}/archive", dst.path().display());
    let target = Target::open(&url, &BTreeMap::new(), 1).unwrap();
    assert!(!target.keeps_metadata());
    let rec = run(upload_file(
        target,
        src.path().to_owned(),
        "f.warc.gz".into(),
        settings(2048, VerifyMode::Size),
    ))
    .unwrap();
    assert_eq!(rec.location, format!("{url}/f.warc.gz"));
    let copied = std::fs::read(dst.path().join("archive/f.warc.gz")).unwrap();
    assert_eq!(copied, content(5000));
}

#[test]
fn bad_urls_and_options_name_their_key() {
    let none = BTreeMap::new();
    let err = Target::open("not a url", &none, 1).unwrap_err();
    assert_eq!(err.key(), "upload.url", "{err}");
    let err = Target::open("ftp://host/dir", &none, 1).unwrap_err();
    assert_eq!(err.key(), "upload.url", "{err}");
    let err = Target::open("memory:///", &none, 1).unwrap_err();
    assert_eq!(err.key(), "upload.url", "{err}");
    let typo = BTreeMap::from([("aws_endpiont".to_owned(), "http://x".to_owned())]);
    let err = Target::open("s3://bucket/p", &typo, 1).unwrap_err();
    assert_eq!(err.key(), "upload.options.aws_endpiont", "{err}");
    let err = Target::open("file:///tmp/x", &typo, 1).unwrap_err();
    assert_eq!(err.key(), "upload.options.aws_endpiont", "{err}");
    let good = BTreeMap::from([
        ("aws_endpoint".to_owned(), "http://127.0.0.1:9".to_owned()),
        ("aws_allow_http".to_owned(), "true".to_owned()),
        ("aws_region".to_owned(), "us-east-1".to_owned()),
    ]);
    let target = Target::open("s3://bucket/some/prefix/", &good, 1).unwrap();
    assert_eq!(target.location("f"), "s3://bucket/some/prefix/f");
    assert_eq!(target.key("f").as_ref(), "some/prefix/f");
}
