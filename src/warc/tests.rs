use std::io::Read;

use super::*;

fn settings(dir: &Path, max: u64) -> WarcSettings {
    WarcSettings {
        dir: dir.to_owned(),
        prefix: "t".into(),
        max_file_bytes: max,
        compression: crate::config::WarcCompression::Gzip,
        compression_level: 1,
        store_below: 1024,
        parquet_index: false,
        info: vec![("software".into(), "trawl-test".into())],
    }
}

fn exchange<'a>(uri: &'a str, payload: &'a [u8]) -> Exchange<'a> {
    Exchange {
        target_uri: uri,
        date: chrono::Utc::now(),
        ip: Some("127.0.0.1".parse().unwrap()),
        request_head: b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n",
        response_head: b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n",
        payload,
        truncated: None,
        identified_type: None,
        languages: None,
    }
}

/// Reads the record at `at` on its own, as a replay tool would.
fn read_member(dir: &Path, at: &WarcRef) -> String {
    let bytes = std::fs::read(dir.join(&at.file)).unwrap();
    let member = &bytes[at.offset as usize..(at.offset + at.length) as usize];
    let mut text = String::new();
    flate2::read::GzDecoder::new(member)
        .read_to_string(&mut text)
        .unwrap();
    text
}

#[test]
fn records_are_addressable_members_with_digests() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = WarcWriter::new(settings(dir.path(), 1 << 30)).unwrap();
    let a = w
        .write_exchange(&exchange("http://a.test/", b"<p>a</p>"))
        .unwrap()
        .at;
    let b = w
        .write_exchange(&exchange("http://a.test/b", b"<p>b</p>"))
        .unwrap()
        .at;
    w.close().unwrap();
    let text = read_member(dir.path(), &b);
    assert!(
        text.starts_with("WARC/1.1\r\nWARC-Type: response\r\n"),
        "{text}"
    );
    assert!(text.contains("WARC-Target-URI: http://a.test/b\r\n"));
    assert!(text.contains(&format!(
        "WARC-Payload-Digest: {}\r\n",
        record::sha256_digest(b"<p>b</p>")
    )));
    assert!(a.offset > 0, "warcinfo comes first");
    assert!(b.offset > a.offset);
    // The `warc` crate reads the file back: warcinfo + 2 × (response, request).
    let files = list_files(dir.path()).unwrap();
    assert_eq!(files.len(), 1);
    let reader = warc::WarcReader::from_path_gzip(&files[0]).unwrap();
    let types: Vec<String> = reader
        .iter_records()
        .map(|r| r.unwrap().warc_type().to_string())
        .collect();
    assert_eq!(
        types,
        ["warcinfo", "response", "request", "response", "request"]
    );
}

#[test]
fn a_responses_block_is_its_head_then_its_payload_and_its_digest_covers_both() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = WarcWriter::new(settings(dir.path(), 1 << 30)).unwrap();
    let payload = "<p>x</p>".repeat(500);
    let ex = exchange("http://a.test/x", payload.as_bytes());
    let at = w.write_exchange(&ex).unwrap().at;
    w.close().unwrap();
    let text = read_member(dir.path(), &at);
    let (head, rest) = text.split_once("\r\n\r\n").unwrap();
    let block = [ex.response_head, ex.payload].concat();
    assert_eq!(rest.as_bytes(), [&block[..], b"\r\n\r\n"].concat());
    assert!(
        head.ends_with(&format!("\r\nContent-Length: {}", block.len())),
        "{head}"
    );
    assert!(
        head.contains(&format!(
            "WARC-Block-Digest: {}\r\n",
            record::sha256_digest(&block)
        )),
        "{head}"
    );
}

#[test]
fn rotates_at_the_size_limit_and_renames_on_close() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = WarcWriter::new(settings(dir.path(), 600)).unwrap();
    let payload = vec![b'x'; 2000];
    for i in 0..3 {
        w.write_exchange(&exchange(&format!("http://a.test/{i}"), &payload))
            .unwrap();
    }
    drop(w);
    let files = list_files(dir.path()).unwrap();
    assert_eq!(files.len(), 3, "{files:?}");
    let open: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .to_string_lossy()
                .ends_with(".open")
        })
        .collect();
    assert!(open.is_empty());
}

#[test]
fn recovery_cuts_a_torn_last_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = WarcWriter::new(settings(dir.path(), 1 << 30)).unwrap();
    let a = w
        .write_exchange(&exchange("http://a.test/", b"first"))
        .unwrap()
        .at;
    w.write_exchange(&exchange("http://a.test/2", b"second"))
        .unwrap();
    w.flush().unwrap();
    // Simulate a crash: leak the writer (no close), then tear the file.
    let open_path = dir.path().join(format!("{}.open", a.file));
    std::mem::forget(w);
    let len = std::fs::metadata(&open_path).unwrap().len();
    let file = OpenOptions::new().write(true).open(&open_path).unwrap();
    file.set_len(len - 7).unwrap();
    // Another writer's open file in the same directory (a cluster node's)
    // is not ours to recover.
    let theirs = dir.path().join("t-n2-20261130000000-00000-ab.warc.gz.open");
    std::fs::write(&theirs, b"in use").unwrap();
    let recovered = recover_open_files(dir.path(), "t", true).unwrap();
    assert_eq!(recovered.len(), 1);
    assert!(theirs.exists(), "left alone");
    // Its indexes, CDXJ and Parquet, hold what was kept: the warcinfo
    // isn't indexed; both responses and the first request are not either
    // (requests never are): two lines, two rows.
    let warc = dir.path().join(&a.file);
    let cdxj = std::fs::read_to_string(cdxj::index_path(&warc)).unwrap();
    let rows = {
        use ::parquet::file::reader::{FileReader, SerializedFileReader};
        let file = std::fs::File::open(parquet::index_path(&warc)).unwrap();
        let reader = SerializedFileReader::new(file).unwrap();
        reader.metadata().file_metadata().num_rows()
    };
    assert_eq!(cdxj.lines().count(), 2, "{cdxj}");
    assert_eq!(rows, 2);
    assert!(recover::written_with(
        "t-n2-20261130000000-00000-ab.warc.gz",
        "t-n2"
    ));
    assert!(!recover::written_with(
        "t-n20-20261130000000-00000-ab.warc.gz",
        "t-n2"
    ));
    assert!(!recover::written_with(
        "t-n2-20261130000000-00000-ab.warc.gz",
        "t"
    ));
    let bytes = std::fs::read(dir.path().join(&a.file)).unwrap();
    // The torn request record of the second exchange is gone; the response
    // of the second exchange and everything before it stays.
    assert!(bytes.len() as u64 > a.offset + a.length);
    assert!((bytes.len() as u64) < len - 7);
    assert!(read_member(dir.path(), &a).contains("first"));
}

fn zstd_settings(dir: &Path, max: u64) -> WarcSettings {
    WarcSettings {
        compression: crate::config::WarcCompression::Zstd,
        compression_level: 3,
        store_below: 1024,
        parquet_index: false,
        ..settings(dir, max)
    }
}

/// The lines of the index beside `warc`.
fn index_lines(warc: &Path) -> Vec<String> {
    std::fs::read_to_string(cdxj::index_path(warc))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_closed_file_has_its_sorted_index_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = WarcWriter::new(settings(dir.path(), 1 << 30)).unwrap();
    let b = w
        .write_exchange(&exchange("http://www.a.test/b", b"<p>b</p>"))
        .unwrap();
    let a = w
        .write_exchange(&exchange("http://a.test/a", b"<p>a</p>"))
        .unwrap();
    let open = dir.path().join(format!("{}.open", a.at.file));
    assert!(!cdxj::index_path(&open).exists());
    w.close().unwrap();
    let files = list_files(dir.path()).unwrap();
    let lines = index_lines(&files[0]);
    // Responses only (no warcinfo, no requests), sorted by key.
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("test,a)/a "), "{lines:?}");
    assert!(lines[1].starts_with("test,a)/b "), "{lines:?}");
    for (line, stored) in lines.iter().zip([&a, &b]) {
        let json: serde_json::Value =
            serde_json::from_str(&line[line.find('{').unwrap()..]).unwrap();
        assert_eq!(json["offset"], stored.at.offset.to_string());
        assert_eq!(json["length"], stored.at.length.to_string());
        assert_eq!(json["filename"], stored.at.file);
        assert_eq!(json["status"], "200");
        assert_eq!(json["mime"], "text/html");
        assert_eq!(
            json["digest"],
            record::format_sha256(&stored.payload_sha256)
        );
    }
}

#[test]
fn zstd_records_are_frames_the_index_points_at() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = WarcWriter::new(zstd_settings(dir.path(), 1 << 30)).unwrap();
    let a = w
        .write_exchange(&exchange("http://a.test/", b"<p>a</p>"))
        .unwrap()
        .at;
    w.close().unwrap();
    assert!(a.file.ends_with(".warc.zst"), "{}", a.file);
    let path = dir.path().join(&a.file);
    let bytes = std::fs::read(&path).unwrap();
    // A zstd frame's magic number opens the file (no dictionary frame).
    assert_eq!(&bytes[..4], &[0x28, 0xB5, 0x2F, 0xFD]);
    let frame = &bytes[a.offset as usize..(a.offset + a.length) as usize];
    let text = zstd::stream::decode_all(frame).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.starts_with("WARC/1.1\r\nWARC-Type: response\r\n"),
        "{text}"
    );
    assert!(text.ends_with("<p>a</p>\r\n\r\n"));
    let lines = index_lines(&path);
    assert_eq!(lines.len(), 1);
    assert!(
        lines[0].contains(&format!("\"offset\": \"{}\"", a.offset)),
        "{lines:?}"
    );
}

#[test]
fn recovery_cuts_and_indexes_a_torn_zstd_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = WarcWriter::new(zstd_settings(dir.path(), 1 << 30)).unwrap();
    let a = w
        .write_exchange(&exchange("http://a.test/", b"first"))
        .unwrap()
        .at;
    w.write_exchange(&exchange("http://a.test/2", b"second"))
        .unwrap();
    w.flush().unwrap();
    let open_path = dir.path().join(format!("{}.open", a.file));
    std::mem::forget(w);
    let len = std::fs::metadata(&open_path).unwrap().len();
    let file = OpenOptions::new().write(true).open(&open_path).unwrap();
    file.set_len(len - 3).unwrap();
    let recovered = recover_open_files(dir.path(), "t", false).unwrap();
    assert_eq!(recovered.len(), 1);
    let path = dir.path().join(&a.file);
    let kept = std::fs::metadata(&path).unwrap().len();
    assert!(kept > a.offset + a.length && kept < len - 3);
    // Both responses survive (only the torn request went), and the
    // index lists them.
    let lines = index_lines(&path);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("test,a)/ "), "{lines:?}");
    assert!(lines[1].starts_with("test,a)/2 "), "{lines:?}");
}

#[test]
fn recovery_indexes_a_gzip_file_like_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = WarcWriter::new(settings(dir.path(), 1 << 30)).unwrap();
    for i in 0..3 {
        w.write_exchange(&exchange(&format!("http://a.test/{i}"), b"x"))
            .unwrap();
    }
    w.close().unwrap();
    let path = list_files(dir.path()).unwrap().remove(0);
    let written = index_lines(&path);
    // The same file, as if a crash had left it open after its last record.
    let open = dir.path().join(format!(
        "{}.open",
        path.file_name().unwrap().to_string_lossy()
    ));
    std::fs::rename(&path, &open).unwrap();
    std::fs::remove_file(cdxj::index_path(&path)).unwrap();
    recover_open_files(dir.path(), "t", false).unwrap();
    assert_eq!(index_lines(&path), written);
}

#[test]
fn rotation_gives_every_file_its_own_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = WarcWriter::new(settings(dir.path(), 600)).unwrap();
    let payload = vec![b'x'; 2000];
    for i in 0..3 {
        w.write_exchange(&exchange(&format!("http://a.test/{i}"), &payload))
            .unwrap();
    }
    drop(w);
    let files = list_files(dir.path()).unwrap();
    assert_eq!(files.len(), 3);
    for file in &files {
        let lines = index_lines(file);
        let name = file.file_name().unwrap().to_string_lossy();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains(&format!("\"filename\": \"{name}\"")));
    }
}

#[test]
fn a_file_whose_close_failed_is_finished_at_the_next_seal_which_fails_until_then() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = WarcWriter::new(settings(dir.path(), 1 << 30)).unwrap();
    let at = w
        .write_exchange(&exchange("http://a.test/", b"<p>a</p>"))
        .unwrap()
        .at;
    // The index cannot be written (a directory where it goes): the close
    // fails, as on a full disk, and the file stays `.open`.
    let final_path = dir.path().join(&at.file);
    let blocker = cdxj::index_path(&final_path);
    std::fs::create_dir(&blocker).unwrap();
    assert!(w.close().is_err());
    assert!(w.closed_files().is_empty());
    assert!(w.seal().is_err(), "no seal while a file is unfinished");
    assert!(w.closed_files().is_empty());
    // The disk takes writes again: the next seal finishes it, whole.
    std::fs::remove_dir(&blocker).unwrap();
    assert_eq!(w.seal().unwrap(), None, "no file is open");
    assert_eq!(w.closed_files(), std::slice::from_ref(&at.file));
    assert!(final_path.exists() && blocker.exists());
    let text = read_member(dir.path(), &at);
    assert!(
        text.contains("WARC-Target-URI: http://a.test/\r\n"),
        "{text}"
    );
    assert_eq!(w.seal().unwrap(), None, "nothing left to seal");
}

#[test]
fn a_seal_leaves_the_file_open_and_says_how_far_its_records_are_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = WarcWriter::new(settings(dir.path(), 1 << 30)).unwrap();
    assert_eq!(w.seal().unwrap(), None, "nothing written, nothing sealed");
    let first = w
        .write_exchange(&exchange("http://a.test/", b"<p>a</p>"))
        .unwrap()
        .at;
    let sealed = w.seal().unwrap().expect("a record was written");
    assert_eq!(sealed.file, first.file);
    let open = dir.path().join(format!("{}.open", first.file));
    let on_disk = std::fs::metadata(&open).unwrap().len();
    assert_eq!(
        sealed.to, on_disk,
        "every byte up to the seal is in the file"
    );
    assert!(
        sealed.to > first.offset + first.length,
        "the request record too"
    );
    assert!(w.closed_files().is_empty(), "the file stays open");
    // The next records go to the same file, after the sealed bytes.
    let second = w
        .write_exchange(&exchange("http://a.test/b", b"<p>b</p>"))
        .unwrap()
        .at;
    assert_eq!(second.file, first.file);
    assert_eq!(second.offset, sealed.to);
    let again = w.seal().unwrap().unwrap();
    assert!(again.to > sealed.to);
    // The sealed prefix is whole records: it reads on its own.
    let bytes = std::fs::read(&open).unwrap();
    let prefix = dir.path().join("prefix.warc.gz");
    std::fs::write(&prefix, &bytes[..sealed.to as usize]).unwrap();
    let records: Vec<_> = warc::WarcReader::from_path_gzip(&prefix)
        .unwrap()
        .iter_records()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(records.len(), 3, "warcinfo, response and request");
}

#[test]
fn an_empty_file_left_open_is_removed_not_kept() {
    let dir = tempfile::tempdir().unwrap();
    let open = dir
        .path()
        .join("t-20260101000000-00000-abcdabcd.warc.gz.open");
    std::fs::write(&open, b"").unwrap();
    let _w = WarcWriter::new(settings(dir.path(), 1 << 30)).unwrap();
    assert!(!open.exists());
    assert!(!dir
        .path()
        .join("t-20260101000000-00000-abcdabcd.warc.gz")
        .exists());
}
