//! A columnar index beside each closed WARC file (`NAME.warc.gz.parquet`,
//! `[warc] parquet_index`): one row per record the CDXJ index lists, with
//! the columns of Common Crawl's columnar index that trawl knows, so that
//! DuckDB, Spark or pyarrow can query a crawl's captures with SQL.
//!
//! It is made from the file's CDXJ index (written just before it, see
//! [`super::cdxj`]), line by line, in the same order (by SURT key, then
//! time), in row groups of [`ROWS_PER_GROUP`]; so it holds exactly what
//! the CDXJ index holds, and a crashed file's recovery writes both.
//!
//! Columns (Common Crawl's names): `url`, `url_surtkey`, `url_host_name`,
//! `url_host_registered_domain` (the public-suffix list's registrable
//! domain), `fetch_time` (UTC timestamp, second precision as in CDXJ),
//! `fetch_status`, `content_mime_type` (the Content-Type's media type,
//! `warc/revisit` for a revisit), `content_mime_detected` (the CDXJ
//! line's `mime-detected`: the type sniffed from a response's payload,
//! `parse/sniff.rs`), `content_digest`, `content_languages` (its
//! `languages`: a page's language, ISO 639-3, when detected; null for
//! other records and after crash recovery), `warc_filename`,
//! `warc_record_offset`, `warc_record_length`. Pages are
//! snappy-compressed.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::basic::Compression;
use parquet::data_type::{ByteArray, ByteArrayType, Int32Type, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::{SerializedColumnWriter, SerializedFileWriter};
use parquet::schema::parser::parse_message_type;

/// Rows a row group holds at most.
pub const ROWS_PER_GROUP: usize = 65_536;

/// The schema, as Parquet's message syntax.
const SCHEMA: &str = "
message capture {
  REQUIRED BYTE_ARRAY url (UTF8);
  REQUIRED BYTE_ARRAY url_surtkey (UTF8);
  OPTIONAL BYTE_ARRAY url_host_name (UTF8);
  OPTIONAL BYTE_ARRAY url_host_registered_domain (UTF8);
  REQUIRED INT64 fetch_time (TIMESTAMP(MILLIS,true));
  OPTIONAL INT32 fetch_status;
  OPTIONAL BYTE_ARRAY content_mime_type (UTF8);
  OPTIONAL BYTE_ARRAY content_mime_detected (UTF8);
  OPTIONAL BYTE_ARRAY content_digest (UTF8);
  OPTIONAL BYTE_ARRAY content_languages (UTF8);
  REQUIRED BYTE_ARRAY warc_filename (UTF8);
  REQUIRED INT64 warc_record_offset;
  REQUIRED INT64 warc_record_length;
}
";

/// Where the Parquet index of the WARC file at `warc` goes.
pub fn index_path(warc: &Path) -> PathBuf {
    let mut name = warc.as_os_str().to_owned();
    name.push(".parquet");
    PathBuf::from(name)
}

/// One capture: a CDXJ line's fields.
#[derive(Debug, Clone, PartialEq, Default)]
struct Row {
    url: String,
    surt: String,
    host: Option<String>,
    domain: Option<String>,
    fetch_time_ms: i64,
    status: Option<i32>,
    mime: Option<String>,
    mime_detected: Option<String>,
    digest: Option<String>,
    languages: Option<String>,
    filename: String,
    offset: i64,
    length: i64,
}

/// The row of a CDXJ line (`SURT TIMESTAMP {json}`); `None` for a line
/// that is not one.
fn row_of(line: &str) -> Option<Row> {
    let capture = super::cdxj::Capture::parse(line)?;
    let host = url::Url::parse(&capture.url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned));
    let domain = host
        .as_deref()
        .map(|h| crate::url::registrable_domain(h).to_owned());
    Some(Row {
        fetch_time_ms: capture.unix_ms()?,
        status: capture.status.map(i32::from),
        filename: capture.filename?,
        offset: i64::try_from(capture.offset?).ok()?,
        length: i64::try_from(capture.length?).ok()?,
        surt: capture.surt,
        host,
        domain,
        mime: capture.mime,
        mime_detected: capture.mime_detected,
        digest: capture.digest,
        languages: capture.languages,
        url: capture.url,
    })
}

/// Writes the Parquet index of the WARC file at `warc` from its CDXJ
/// index at `cdxj`: into a temporary file, synced, then renamed (a crash
/// never leaves half an index under the final name). Lines that are not
/// CDXJ are skipped.
pub fn write_from_cdxj(cdxj: &Path, warc: &Path) -> io::Result<PathBuf> {
    let path = index_path(warc);
    let partial = {
        let mut name = path.as_os_str().to_owned();
        name.push(".partial");
        PathBuf::from(name)
    };
    let lines = BufReader::new(File::open(cdxj)?).lines();
    let file = File::create(&partial)?;
    let file = write_rows(file, lines)?;
    file.sync_all()?;
    std::fs::rename(&partial, &path)?;
    Ok(path)
}

/// [`write_from_cdxj`], its failure logged rather than returned: the
/// Parquet index is derived from the CDXJ index, and a file whose
/// Parquet index could not be written (a full disk) is still closed,
/// sealed and uploaded; its partial file is removed.
pub fn write_beside(cdxj: &Path, warc: &Path) {
    if let Err(err) = write_from_cdxj(cdxj, warc) {
        tracing::warn!(file = %warc.display(), error = %err, "the parquet index of a warc file could not be written");
        let mut partial = index_path(warc).into_os_string();
        partial.push(".partial");
        let _ = std::fs::remove_file(partial);
    }
}

/// Writes the rows of `lines` to `out` as a Parquet file; returns `out`.
fn write_rows(out: File, lines: impl Iterator<Item = io::Result<String>>) -> io::Result<File> {
    let schema = Arc::new(parse_message_type(SCHEMA).map_err(io::Error::other)?);
    let properties = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_created_by(format!("trawl {}", env!("CARGO_PKG_VERSION")))
        .build();
    let mut writer =
        SerializedFileWriter::new(out, schema, Arc::new(properties)).map_err(io::Error::other)?;
    let mut group = Vec::with_capacity(1024);
    for line in lines {
        if let Some(row) = row_of(&line?) {
            group.push(row);
        }
        if group.len() == ROWS_PER_GROUP {
            write_group(&mut writer, &group)?;
            group.clear();
        }
    }
    if !group.is_empty() {
        write_group(&mut writer, &group)?;
    }
    writer.into_inner().map_err(io::Error::other)
}

/// Writes `rows` as one row group, column by column in schema order.
fn write_group(writer: &mut SerializedFileWriter<File>, rows: &[Row]) -> io::Result<()> {
    let mut group = writer.next_row_group().map_err(io::Error::other)?;
    let text = |f: fn(&Row) -> Option<&str>| -> Vec<Option<&str>> { rows.iter().map(f).collect() };
    let columns: [Column<'_>; 13] = [
        Column::Required(rows.iter().map(|r| r.url.as_str()).collect()),
        Column::Required(rows.iter().map(|r| r.surt.as_str()).collect()),
        Column::Text(text(|r| r.host.as_deref())),
        Column::Text(text(|r| r.domain.as_deref())),
        Column::Long(rows.iter().map(|r| r.fetch_time_ms).collect()),
        Column::Int(rows.iter().map(|r| r.status).collect()),
        Column::Text(text(|r| r.mime.as_deref())),
        Column::Text(text(|r| r.mime_detected.as_deref())),
        Column::Text(text(|r| r.digest.as_deref())),
        Column::Text(text(|r| r.languages.as_deref())),
        Column::Required(rows.iter().map(|r| r.filename.as_str()).collect()),
        Column::Long(rows.iter().map(|r| r.offset).collect()),
        Column::Long(rows.iter().map(|r| r.length).collect()),
    ];
    for column in &columns {
        let mut out = group
            .next_column()
            .map_err(io::Error::other)?
            .ok_or_else(|| io::Error::other("parquet schema has fewer columns than rows"))?;
        column.write(&mut out)?;
        out.close().map_err(io::Error::other)?;
    }
    group.close().map_err(io::Error::other)?;
    Ok(())
}

/// One column's values for a row group (`None`: null).
enum Column<'a> {
    Required(Vec<&'a str>),
    Text(Vec<Option<&'a str>>),
    Int(Vec<Option<i32>>),
    Long(Vec<i64>),
}

impl Column<'_> {
    /// Writes the values, with definition levels for optional columns
    /// (1: a value, 0: null; required ones have none).
    fn write(&self, out: &mut SerializedColumnWriter<'_>) -> io::Result<()> {
        let bytes = |v: &&str| ByteArray::from(v.as_bytes().to_vec());
        let written = match self {
            Column::Required(values) => {
                let data: Vec<ByteArray> = values.iter().map(bytes).collect();
                out.typed::<ByteArrayType>().write_batch(&data, None, None)
            }
            Column::Text(values) => {
                let data: Vec<ByteArray> = values.iter().flatten().map(bytes).collect();
                let def: Vec<i16> = values.iter().map(|v| i16::from(v.is_some())).collect();
                out.typed::<ByteArrayType>()
                    .write_batch(&data, Some(&def), None)
            }
            Column::Int(values) => {
                let data: Vec<i32> = values.iter().flatten().copied().collect();
                let def: Vec<i16> = values.iter().map(|v| i16::from(v.is_some())).collect();
                out.typed::<Int32Type>()
                    .write_batch(&data, Some(&def), None)
            }
            Column::Long(values) => out.typed::<Int64Type>().write_batch(values, None, None),
        };
        written.map(|_| ()).map_err(io::Error::other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cdxj_line_is_a_row_and_anything_else_is_skipped() {
        let line = "test,site0001)/p/1.html 20261207061455 {\"url\": \"http://site0001.test:8080/p/1.html\", \"mime\": \"text/html\", \"status\": \"200\", \"digest\": \"sha256:ABC\", \"length\": \"370\", \"offset\": \"1734\", \"filename\": \"t.warc.gz\"}";
        let row = row_of(line).unwrap();
        assert_eq!(row.url, "http://site0001.test:8080/p/1.html");
        assert_eq!(row.surt, "test,site0001)/p/1.html");
        assert_eq!(row.host.as_deref(), Some("site0001.test"));
        assert_eq!(row.domain.as_deref(), Some("site0001.test"));
        assert_eq!(row.status, Some(200));
        assert_eq!((row.offset, row.length), (1734, 370));
        // 2026-12-07T06:14:55Z
        assert_eq!(row.fetch_time_ms, 1_796_624_095_000);
        let dns = "dns:a.test 20261207061455 {\"url\": \"dns:a.test\", \"mime\": \"text/dns\", \"length\": \"9\", \"offset\": \"0\", \"filename\": \"t.warc.gz\"}";
        let row = row_of(dns).unwrap();
        assert_eq!((row.host, row.status), (None, None));
        for bad in [
            "",
            "key 2026",
            "key 20261207061455 {not json}",
            "k 2026 {\"url\": \"x\"}",
        ] {
            assert_eq!(row_of(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn rows_in_several_groups_are_written_and_read_back() {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        let dir = tempfile::tempdir().unwrap();
        let cdxj = dir.path().join("t.warc.gz.cdxj");
        let n = ROWS_PER_GROUP + 10;
        let lines: Vec<String> = (0..n)
            .map(|i| format!("test,a)/{i} 20261207061455 {{\"url\": \"http://a.test/{i}\", \"length\": \"{i}\", \"offset\": \"{}\", \"filename\": \"t.warc.gz\"}}", i * 10))
            .chain(["not a line".to_owned()])
            .collect();
        std::fs::write(&cdxj, lines.join("\n")).unwrap();
        let path = write_from_cdxj(&cdxj, &dir.path().join("t.warc.gz")).unwrap();
        assert_eq!(path, dir.path().join("t.warc.gz.parquet"));
        let reader = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
        let meta = reader.metadata();
        assert_eq!(meta.file_metadata().num_rows(), n as i64);
        assert_eq!(meta.num_row_groups(), 2);
        assert_eq!(meta.file_metadata().schema_descr().num_columns(), 13);
        let last = reader.get_row_iter(None).unwrap().last().unwrap().unwrap();
        let text = last.to_string();
        assert!(
            text.contains(&format!("url: \"http://a.test/{}\"", n - 1)),
            "{text}"
        );
        assert!(text.contains("fetch_status: null"), "{text}");
    }
}
