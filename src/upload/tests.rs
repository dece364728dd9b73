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

#[test]
fn pending_goes_oldest_first_and_backs_off_doubling() {
    let mut p = Pending::new(Duration::from_secs(10), Duration::from_secs(25));
    let t0 = Instant::now();
    p.add("b");
    p.add("a");
    p.add("a");
    assert_eq!(p.next_ready(t0).as_deref(), Some("a"));
    p.add("a"); // in flight: not queued twice
    assert_eq!(p.failed("a", t0), Duration::from_secs(10));
    assert_eq!(p.failures("a"), 1);
    // "a" waits; "b" is ready.
    assert_eq!(p.next_ready(t0).as_deref(), Some("b"));
    assert_eq!(p.next_ready(t0), None);
    assert_eq!(p.next_wake(t0), Some(Duration::from_secs(10)));
    let t1 = t0 + Duration::from_secs(10);
    assert_eq!(p.next_ready(t1).as_deref(), Some("a"));
    assert_eq!(p.failed("a", t1), Duration::from_secs(20));
    let t2 = t1 + Duration::from_secs(20);
    assert_eq!(p.next_ready(t2).as_deref(), Some("a"));
    assert_eq!(p.failed("a", t2), Duration::from_secs(25), "capped");
    assert_eq!(p.failures("a"), 3);
    p.done("b");
    assert!(!p.is_empty());
    let t3 = t2 + Duration::from_secs(25);
    assert_eq!(p.next_ready(t3).as_deref(), Some("a"));
    p.done("a");
    assert_eq!(p.failures("a"), 0);
    assert!(p.is_empty());
    assert_eq!(p.next_wake(t3), None);
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
    ] {
        std::fs::write(dir.path().join(name), b"x").unwrap();
    }
    assert_eq!(
        closed_files(dir.path(), "trawl").unwrap(),
        [
            "trawl-20261130120000-00000-abcd.warc.gz",
            "trawl-20261130120000-00001-abcd.warc.gz"
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
