//! The page format of the BM25 index access method, independent of PostgreSQL's buffer manager:
//! the extension reads and writes pages through [`PageSource`] and [`PageSink`], and the tests
//! here through an in-memory set of pages.
//!
//! An index is a metapage ([`Meta`], block 0), a list of recent rows not yet in a segment (the
//! pending list: [`PendingDoc`] records appended to a chain of pages) and immutable segments
//! ([`SegmentRef`]). A segment is four chains of pages ("streams"):
//! - postings: per term, in term order, its blocks ([`crate::postings`]), each a header
//!   (first document, span, count, the bound's staircase, byte length) and bytes;
//! - dictionary: per term, in term order, `(term, documents, blocks, where its postings start)`;
//!   an entry never spans two pages;
//! - directory: per dictionary page, its block number and first term (read whole when a segment
//!   is opened: a term is found by one dictionary page read);
//! - documents: every row of the segment in order, delta-encoded (for VACUUM and checks).
//!
//! A document is a heap row's position (block << 16 | offset), so postings in document order
//! are in table order, and a term's parts (segments, pending list) never share a document.

use std::collections::BTreeMap;

use crate::postings::{get_varint, put_varint, BlockMeta, Posting, Staircase, TermPostings, STEPS};
use crate::{CoreError, SqlState};

/// No page (the end of a chain).
pub const NO_PAGE: u32 = u32::MAX;

/// The format version written in the metapage.
pub const VERSION: u32 = 3;

const MAGIC: u32 = 0x4243_5042; // "BPCB"

/// At most this many segments; a new one beyond it merges them all.
pub const MAX_SEGMENTS: usize = 32;

/// What a page holds (kept in its special space with the next page of its chain).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Meta = 1,
    Postings = 2,
    Dictionary = 3,
    Directory = 4,
    Docs = 5,
    Pending = 6,
    /// A page of a segment or pending list that was replaced: reusable.
    Free = 7,
}

impl Kind {
    pub fn from_u16(v: u16) -> Option<Kind> {
        Some(match v {
            1 => Kind::Meta,
            2 => Kind::Postings,
            3 => Kind::Dictionary,
            4 => Kind::Directory,
            5 => Kind::Docs,
            6 => Kind::Pending,
            7 => Kind::Free,
            _ => return None,
        })
    }
}

/// A page as read: its kind, the next page of its chain and its used bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub kind: Kind,
    pub next: u32,
    pub data: Vec<u8>,
}

/// Where pages are read from.
pub trait PageSource {
    fn read(&mut self, blk: u32) -> Result<Page, CoreError>;

    /// [`Self::read`] into a page the caller reuses (a chain's reader: one buffer for all of
    /// its pages).
    fn read_into(&mut self, blk: u32, page: &mut Page) -> Result<(), CoreError> {
        *page = self.read(blk)?;
        Ok(())
    }

    /// Append page `blk`'s used bytes to `out`: its kind and the next page of its chain.
    fn append(&mut self, blk: u32, out: &mut Vec<u8>) -> Result<(Kind, u32), CoreError> {
        let page = self.read(blk)?;
        out.extend_from_slice(&page.data);
        Ok((page.kind, page.next))
    }
}

/// Where new pages are written: `alloc` reserves a page (its number is needed by the page
/// before it in a chain), `write` fills it.
pub trait PageSink {
    fn alloc(&mut self) -> Result<u32, CoreError>;
    fn write(&mut self, blk: u32, page: &Page) -> Result<(), CoreError>;
    /// Bytes of data a page holds.
    fn capacity(&self) -> usize;
}

pub fn damaged(what: impl Into<String>) -> CoreError {
    CoreError::new(
        SqlState::IndexCorrupted,
        format!("BM25 index is damaged: {}", what.into()),
        "Rebuild the index with REINDEX INDEX CONCURRENTLY.",
    )
}

/// One segment's place in the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SegmentRef {
    pub postings_head: u32,
    pub dictionary_head: u32,
    pub directory: u32,
    pub dictionary_pages: u32,
    pub docs_head: u32,
    pub docs: u64,
    pub terms: u64,
    pub postings: u64,
}

/// The metapage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    pub version: u32,
    /// The pending list: first page, last page, bytes used on the last page, rows and bytes.
    pub pending_head: u32,
    pub pending_tail: u32,
    pub pending_tail_used: u32,
    pub pending_docs: u64,
    pub pending_bytes: u64,
    pub segments: Vec<SegmentRef>,
}

impl Default for Meta {
    fn default() -> Meta {
        Meta {
            version: VERSION,
            pending_head: NO_PAGE,
            pending_tail: NO_PAGE,
            pending_tail_used: 0,
            pending_docs: 0,
            pending_bytes: 0,
            segments: Vec::new(),
        }
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn get_u32(bytes: &[u8], at: &mut usize) -> Option<u32> {
    let v = u32::from_le_bytes(bytes.get(*at..*at + 4)?.try_into().ok()?);
    *at += 4;
    Some(v)
}

fn varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    get_varint(bytes, at)
}

fn varint_u32(bytes: &[u8], at: &mut usize) -> Option<u32> {
    u32::try_from(get_varint(bytes, at)?).ok()
}

impl Meta {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.segments.len() * 32);
        put_u32(&mut out, MAGIC);
        put_u32(&mut out, self.version);
        put_u32(&mut out, self.pending_head);
        put_u32(&mut out, self.pending_tail);
        put_u32(&mut out, self.pending_tail_used);
        put_varint(&mut out, self.pending_docs);
        put_varint(&mut out, self.pending_bytes);
        put_varint(&mut out, self.segments.len() as u64);
        for s in &self.segments {
            put_u32(&mut out, s.postings_head);
            put_u32(&mut out, s.dictionary_head);
            put_u32(&mut out, s.directory);
            put_u32(&mut out, s.dictionary_pages);
            put_u32(&mut out, s.docs_head);
            put_varint(&mut out, s.docs);
            put_varint(&mut out, s.terms);
            put_varint(&mut out, s.postings);
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Meta, CoreError> {
        let bad = || damaged("the metapage does not hold a BM25 index's header");
        let mut at = 0;
        if get_u32(bytes, &mut at) != Some(MAGIC) {
            return Err(bad());
        }
        let version = get_u32(bytes, &mut at).ok_or_else(bad)?;
        if version != VERSION {
            return Err(CoreError::new(
                SqlState::ObjectNotInPrerequisiteState,
                format!(
                    "BM25 index format version {version} is not supported by this library (it reads version {VERSION})"
                ),
                "Rebuild the index with REINDEX INDEX CONCURRENTLY.",
            ));
        }
        let mut m = Meta {
            version,
            pending_head: get_u32(bytes, &mut at).ok_or_else(bad)?,
            pending_tail: get_u32(bytes, &mut at).ok_or_else(bad)?,
            pending_tail_used: get_u32(bytes, &mut at).ok_or_else(bad)?,
            pending_docs: varint(bytes, &mut at).ok_or_else(bad)?,
            pending_bytes: varint(bytes, &mut at).ok_or_else(bad)?,
            segments: Vec::new(),
        };
        let n = varint(bytes, &mut at).ok_or_else(bad)?;
        for _ in 0..n {
            m.segments.push(SegmentRef {
                postings_head: get_u32(bytes, &mut at).ok_or_else(bad)?,
                dictionary_head: get_u32(bytes, &mut at).ok_or_else(bad)?,
                directory: get_u32(bytes, &mut at).ok_or_else(bad)?,
                dictionary_pages: get_u32(bytes, &mut at).ok_or_else(bad)?,
                docs_head: get_u32(bytes, &mut at).ok_or_else(bad)?,
                docs: varint(bytes, &mut at).ok_or_else(bad)?,
                terms: varint(bytes, &mut at).ok_or_else(bad)?,
                postings: varint(bytes, &mut at).ok_or_else(bad)?,
            });
        }
        Ok(m)
    }

    /// Documents in the index (dead rows not yet vacuumed included).
    pub fn docs(&self) -> u64 {
        self.pending_docs + self.segments.iter().map(|s| s.docs).sum::<u64>()
    }
}

/// Writes one chain of pages.
struct StreamWriter {
    kind: Kind,
    head: u32,
    blk: u32,
    buf: Vec<u8>,
    pages: u32,
}

impl StreamWriter {
    fn new(sink: &mut dyn PageSink, kind: Kind) -> Result<StreamWriter, CoreError> {
        let blk = sink.alloc()?;
        Ok(StreamWriter { kind, head: blk, blk, buf: Vec::with_capacity(sink.capacity()), pages: 1 })
    }

    /// Where the next byte goes.
    fn position(&self) -> (u32, u32) {
        (self.blk, self.buf.len() as u32)
    }

    fn turn(&mut self, sink: &mut dyn PageSink) -> Result<(), CoreError> {
        let next = sink.alloc()?;
        sink.write(self.blk, &Page { kind: self.kind, next, data: std::mem::take(&mut self.buf) })?;
        self.blk = next;
        self.pages += 1;
        Ok(())
    }

    fn append(&mut self, sink: &mut dyn PageSink, mut bytes: &[u8]) -> Result<(), CoreError> {
        let cap = sink.capacity();
        while !bytes.is_empty() {
            if self.buf.len() >= cap {
                self.turn(sink)?;
            }
            let n = (cap - self.buf.len()).min(bytes.len());
            self.buf.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
        }
        Ok(())
    }

    /// Append bytes that must stay on one page; true when they start a new page.
    fn append_whole(&mut self, sink: &mut dyn PageSink, bytes: &[u8]) -> Result<bool, CoreError> {
        let fresh = !self.buf.is_empty() && self.buf.len() + bytes.len() > sink.capacity();
        if fresh {
            self.turn(sink)?;
        }
        self.append(sink, bytes)?;
        Ok(fresh || self.pages == 1 && self.buf.len() == bytes.len())
    }

    fn finish(mut self, sink: &mut dyn PageSink) -> Result<(u32, u32), CoreError> {
        sink.write(self.blk, &Page { kind: self.kind, next: NO_PAGE, data: std::mem::take(&mut self.buf) })?;
        Ok((self.head, self.pages))
    }
}

/// Reads a chain of pages from a position.
pub struct StreamReader<'s> {
    src: &'s mut dyn PageSource,
    kind: Kind,
    page: Page,
    off: usize,
}

impl<'s> StreamReader<'s> {
    pub fn open(src: &'s mut dyn PageSource, kind: Kind, blk: u32, off: u32) -> Result<StreamReader<'s>, CoreError> {
        let page = src.read(blk)?;
        if page.kind != kind || off as usize > page.data.len() {
            return Err(damaged(format!("page {blk} is not the {kind:?} page a chain points to")));
        }
        Ok(StreamReader { src, kind, page, off: off as usize })
    }

    fn next_page(&mut self) -> Result<(), CoreError> {
        let next = self.page.next;
        if next == NO_PAGE {
            return Err(damaged(format!("a {:?} chain ends early", self.kind)));
        }
        self.src.read_into(next, &mut self.page)?;
        if self.page.kind != self.kind {
            return Err(damaged(format!("page {next} is not the {:?} page a chain points to", self.kind)));
        }
        self.off = 0;
        Ok(())
    }

    /// The next `n` bytes, across pages.
    pub fn read(&mut self, n: usize, out: &mut Vec<u8>) -> Result<(), CoreError> {
        let mut left = n;
        while left > 0 {
            if self.off >= self.page.data.len() {
                self.next_page()?;
                continue;
            }
            let take = (self.page.data.len() - self.off).min(left);
            out.extend_from_slice(&self.page.data[self.off..self.off + take]);
            self.off += take;
            left -= take;
        }
        Ok(())
    }

    pub fn varint(&mut self) -> Result<u64, CoreError> {
        // a number wholly on the current page (all but the last few bytes of a page)
        if let Some(v) = self.page.data.get(self.off..).and_then(|rest| {
            let mut at = 0;
            let v = crate::postings::get_varint(rest, &mut at)?;
            self.off += at;
            Some(v)
        }) {
            return Ok(v);
        }
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            if self.off >= self.page.data.len() {
                self.next_page()?;
            }
            let b = self.page.data[self.off];
            self.off += 1;
            v |= u64::from(b & 0x7F) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(damaged(format!("a number in a {:?} chain is too long", self.kind)))
    }
}

fn block_header(out: &mut Vec<u8>, m: &BlockMeta, nbytes: usize) {
    put_varint(out, m.first_doc);
    put_varint(out, m.last_doc - m.first_doc);
    put_varint(out, u64::from(m.count));
    let steps = m.staircase.steps();
    put_varint(out, steps.len() as u64);
    for &(tf, len) in steps {
        put_varint(out, u64::from(tf));
        put_varint(out, u64::from(len));
    }
    put_varint(out, nbytes as u64);
}

/// Writes one segment: terms in increasing byte order, each with its postings.
pub struct SegmentWriter {
    postings: StreamWriter,
    dictionary: StreamWriter,
    directory_entries: Vec<(u32, Vec<u8>)>,
    last_term: Option<Vec<u8>>,
    terms: u64,
    total: u64,
    scratch: Vec<u8>,
}

impl SegmentWriter {
    pub fn new(sink: &mut dyn PageSink) -> Result<SegmentWriter, CoreError> {
        Ok(SegmentWriter {
            postings: StreamWriter::new(sink, Kind::Postings)?,
            dictionary: StreamWriter::new(sink, Kind::Dictionary)?,
            directory_entries: Vec::new(),
            last_term: None,
            terms: 0,
            total: 0,
            scratch: Vec::new(),
        })
    }

    /// Add a term (after every smaller one); a term without postings is left out.
    pub fn add(&mut self, sink: &mut dyn PageSink, term: &[u8], postings: &TermPostings) -> Result<(), CoreError> {
        if postings.blocks.is_empty() {
            return Ok(());
        }
        if self.last_term.as_deref().is_some_and(|l| l >= term) {
            return Err(CoreError::new(
                SqlState::DataException,
                "BM25 index terms must be written in increasing order",
                "This is a bug in pg_corpus; report it.",
            ));
        }
        let (blk, off) = self.postings.position();
        for (m, bytes) in postings.iter_blocks() {
            self.scratch.clear();
            block_header(&mut self.scratch, m, bytes.len());
            let header = std::mem::take(&mut self.scratch);
            self.postings.append(sink, &header)?;
            self.scratch = header;
            self.postings.append(sink, bytes)?;
        }
        let df = postings.postings() as u64;
        let mut entry = Vec::with_capacity(term.len() + 24);
        put_varint(&mut entry, term.len() as u64);
        entry.extend_from_slice(term);
        put_varint(&mut entry, df);
        put_varint(&mut entry, postings.blocks.len() as u64);
        put_u32(&mut entry, blk);
        put_varint(&mut entry, u64::from(off));
        if entry.len() > sink.capacity() {
            return Err(CoreError::new(
                SqlState::InvalidParameterValue,
                format!("a BM25 index term of {} bytes does not fit on a page", term.len()),
                "Index terms are tsvector lexemes; a lexeme is at most 2,046 bytes.",
            ));
        }
        if self.dictionary.append_whole(sink, &entry)? {
            self.directory_entries.push((self.dictionary.blk, term.to_vec()));
        }
        self.last_term = Some(term.to_vec());
        self.terms += 1;
        self.total += df;
        Ok(())
    }

    /// Write the documents list and the directory; the segment's reference.
    pub fn finish(self, sink: &mut dyn PageSink, docs: &[u64]) -> Result<SegmentRef, CoreError> {
        let (postings_head, _) = self.postings.finish(sink)?;
        let (dictionary_head, _) = self.dictionary.finish(sink)?;
        let mut directory = StreamWriter::new(sink, Kind::Directory)?;
        let mut entry = Vec::new();
        for (blk, term) in &self.directory_entries {
            entry.clear();
            put_u32(&mut entry, *blk);
            put_varint(&mut entry, term.len() as u64);
            entry.extend_from_slice(term);
            directory.append(sink, &entry)?;
        }
        let (dir_head, _) = directory.finish(sink)?;
        let mut list = StreamWriter::new(sink, Kind::Docs)?;
        let mut prev = 0u64;
        let mut bytes = Vec::with_capacity(docs.len() * 3);
        for &d in docs {
            put_varint(&mut bytes, d - prev);
            prev = d;
        }
        list.append(sink, &bytes)?;
        let (docs_head, _) = list.finish(sink)?;
        Ok(SegmentRef {
            postings_head,
            dictionary_head,
            directory: dir_head,
            dictionary_pages: self.directory_entries.len() as u32,
            docs_head,
            docs: docs.len() as u64,
            terms: self.terms,
            postings: self.total,
        })
    }
}

/// Write a segment of `terms` (any order) over `docs` (sorted).
pub fn write_segment(
    sink: &mut dyn PageSink,
    terms: &BTreeMap<Vec<u8>, TermPostings>,
    docs: &[u64],
) -> Result<SegmentRef, CoreError> {
    let mut w = SegmentWriter::new(sink)?;
    for (term, p) in terms {
        w.add(sink, term, p)?;
    }
    w.finish(sink, docs)
}

/// One dictionary entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DictEntry {
    pub term: Vec<u8>,
    pub df: u64,
    pub blocks: u32,
    pub blk: u32,
    pub off: u32,
}

fn decode_entries(data: &[u8]) -> Result<Vec<DictEntry>, CoreError> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < data.len() {
        let (term, rest) = next_entry(data, &mut at)?;
        out.push(DictEntry { term: term.to_vec(), ..rest });
    }
    Ok(out)
}

/// The entry of `term` on a dictionary page, read in place (no entry before it copied).
fn find_entry(data: &[u8], term: &[u8]) -> Result<Option<DictEntry>, CoreError> {
    let mut at = 0;
    while at < data.len() {
        let (t, rest) = next_entry(data, &mut at)?;
        if t == term {
            return Ok(Some(DictEntry { term: t.to_vec(), ..rest }));
        }
    }
    Ok(None)
}

/// The dictionary entry at `at` (its term borrowed; the returned entry's own term empty), `at`
/// moved past it.
fn next_entry<'d>(data: &'d [u8], at: &mut usize) -> Result<(&'d [u8], DictEntry), CoreError> {
    let bad = || damaged("a dictionary entry does not decode");
    let len = varint(data, at).ok_or_else(bad)? as usize;
    let term = data.get(*at..at.checked_add(len).ok_or_else(bad)?).ok_or_else(bad)?;
    *at += len;
    let df = varint(data, at).ok_or_else(bad)?;
    let blocks = varint_u32(data, at).ok_or_else(bad)?;
    let blk = get_u32(data, at).ok_or_else(bad)?;
    let off = varint_u32(data, at).ok_or_else(bad)?;
    Ok((term, DictEntry { term: Vec::new(), df, blocks, blk, off }))
}

/// An opened segment: its directory read.
#[derive(Debug, Clone)]
pub struct Segment {
    pub re: SegmentRef,
    directory: Vec<(u32, Vec<u8>)>,
}

impl Segment {
    pub fn open(src: &mut dyn PageSource, re: SegmentRef) -> Result<Segment, CoreError> {
        let mut directory = Vec::with_capacity(re.dictionary_pages as usize);
        let mut r = StreamReader::open(src, Kind::Directory, re.directory, 0)?;
        let mut term = Vec::new();
        let mut b = Vec::with_capacity(4);
        for _ in 0..re.dictionary_pages {
            b.clear();
            r.read(4, &mut b)?;
            let blk = u32::from_le_bytes(b[..4].try_into().expect("four bytes"));
            let len = r.varint()? as usize;
            term.clear();
            r.read(len, &mut term)?;
            directory.push((blk, term.clone()));
        }
        Ok(Segment { re, directory })
    }

    /// A term's dictionary entry.
    pub fn entry(&self, src: &mut dyn PageSource, term: &[u8]) -> Result<Option<DictEntry>, CoreError> {
        let i = self.directory.partition_point(|(_, first)| first.as_slice() <= term);
        if i == 0 {
            return Ok(None);
        }
        let page = src.read(self.directory[i - 1].0)?;
        if page.kind != Kind::Dictionary {
            return Err(damaged("the directory points to a page that is not a dictionary page"));
        }
        find_entry(&page.data, term)
    }

    /// The postings a dictionary entry of this segment points to.
    pub fn read(&self, src: &mut dyn PageSource, entry: &DictEntry) -> Result<TermPostings, CoreError> {
        read_postings(src, entry)
    }

    /// A term's postings (empty when the segment does not hold it).
    pub fn postings(&self, src: &mut dyn PageSource, term: &[u8]) -> Result<TermPostings, CoreError> {
        match self.entry(src, term)? {
            Some(e) => read_postings(src, &e),
            None => Ok(TermPostings::default()),
        }
    }

    /// Every term with its postings, in term order.
    pub fn for_each_term(
        &self,
        src: &mut dyn PageSource,
        mut f: impl FnMut(&[u8], TermPostings) -> Result<(), CoreError>,
    ) -> Result<(), CoreError> {
        for (blk, _) in &self.directory {
            let page = src.read(*blk)?;
            if page.kind != Kind::Dictionary {
                return Err(damaged("the directory points to a page that is not a dictionary page"));
            }
            for e in decode_entries(&page.data)? {
                let p = read_postings(src, &e)?;
                f(&e.term, p)?;
            }
        }
        Ok(())
    }

    /// The segment's documents, in order.
    pub fn docs(&self, src: &mut dyn PageSource) -> Result<Vec<u64>, CoreError> {
        let mut out = Vec::with_capacity(self.re.docs as usize);
        let mut r = StreamReader::open(src, Kind::Docs, self.re.docs_head, 0)?;
        let mut d = 0u64;
        for _ in 0..self.re.docs {
            d = d.checked_add(r.varint()?).ok_or_else(|| damaged("a document number overflows"))?;
            out.push(d);
        }
        Ok(out)
    }

    /// Every page of the segment (to free them once it is replaced).
    pub fn pages(&self, src: &mut dyn PageSource) -> Result<Vec<u32>, CoreError> {
        let mut out = Vec::new();
        let chain = |src: &mut dyn PageSource, head: u32, out: &mut Vec<u32>| -> Result<(), CoreError> {
            let mut blk = head;
            while blk != NO_PAGE {
                out.push(blk);
                if out.len() > 1 << 31 {
                    return Err(damaged("a chain of pages loops"));
                }
                blk = src.read(blk)?.next;
            }
            Ok(())
        };
        for head in [self.re.postings_head, self.re.dictionary_head, self.re.directory, self.re.docs_head] {
            chain(src, head, &mut out)?;
        }
        Ok(out)
    }
}

/// The most bytes a block's postings take (each number of each posting a varint of at most 10
/// bytes): a longer block is damage, not data to read on for.
const MAX_BLOCK_BYTES: usize = crate::postings::BLOCK_SIZE * 3 * 10;

/// The most bytes a block's header takes (as [`MAX_BLOCK_BYTES`]).
const MAX_HEADER_BYTES: usize = (4 + 2 * STEPS + 1) * 10;

/// A term's postings. The chain's pages are copied whole, one after another, from the entry's
/// first page: a block's bytes are contiguous there wherever the page breaks fall, and its
/// header is read in place.
fn read_postings(src: &mut dyn PageSource, e: &DictEntry) -> Result<TermPostings, CoreError> {
    let mut t = TermPostings::with_capacity(e.blocks as usize);
    let (kind, mut next) = src.append(e.blk, t.data_mut())?;
    if kind != Kind::Postings || e.off as usize > t.data().len() {
        return Err(damaged(format!("page {} is not the Postings page a chain points to", e.blk)));
    }
    let mut more = |t: &mut TermPostings| -> Result<(), CoreError> {
        if next == NO_PAGE {
            return Err(damaged("a Postings chain ends early"));
        }
        let blk = next;
        let (kind, after) = src.append(blk, t.data_mut())?;
        if kind != Kind::Postings {
            return Err(damaged(format!("page {blk} is not the Postings page a chain points to")));
        }
        next = after;
        Ok(())
    };
    let mut at = e.off as usize;
    for _ in 0..e.blocks {
        let (meta, n, header) = loop {
            match block_header_at(&t.data()[at..])? {
                Some(h) => break h,
                None => more(&mut t)?,
            }
        };
        let start = at + header;
        let end = start + n;
        while t.data().len() < end {
            more(&mut t)?;
        }
        t.push_at(meta, start..end);
        at = end;
    }
    Ok(t)
}

/// A block's header at the start of `bytes`: the block, its postings' byte count and the
/// header's own; None when `bytes` ends within it (the rest is on the chain's next page).
fn block_header_at(bytes: &[u8]) -> Result<Option<(BlockMeta, usize, usize)>, CoreError> {
    let mut at = 0;
    let mut next = || get_varint(bytes, &mut at);
    let parsed = (|| {
        let first_doc = next()?;
        let span = next()?;
        let count = next()?;
        let nsteps = next()?;
        let mut steps = [(0u64, 0u64); STEPS];
        for step in steps.iter_mut().take((nsteps as usize).min(STEPS)) {
            *step = (next()?, next()?);
        }
        Some((first_doc, span, count, nsteps, steps, next()?))
    })();
    let Some((first_doc, span, count, nsteps, steps, n)) = parsed else {
        return if bytes.len() >= MAX_HEADER_BYTES { Err(damaged("a block header is malformed")) } else { Ok(None) };
    };
    let count = u32::try_from(count).map_err(|_| damaged("a block count overflows"))?;
    if nsteps == 0 || nsteps > STEPS as u64 {
        return Err(damaged(format!("a block header holds {nsteps} bound steps")));
    }
    let mut pairs = [(0u32, 0u32); STEPS];
    for (pair, &(tf, len)) in pairs.iter_mut().zip(&steps).take(nsteps as usize) {
        let tf = u32::try_from(tf).map_err(|_| damaged("a frequency overflows"))?;
        let len = u32::try_from(len).map_err(|_| damaged("a length overflows"))?;
        *pair = (tf, len);
    }
    let staircase = Staircase::from_steps(&pairs[..nsteps as usize])
        .ok_or_else(|| damaged("a block's bound steps are out of order"))?;
    let n = usize::try_from(n).ok().filter(|&n| n <= MAX_BLOCK_BYTES);
    let n = n.ok_or_else(|| damaged("a block's postings are longer than a block holds"))?;
    let last_doc = first_doc.checked_add(span).ok_or_else(|| damaged("a block's last document overflows"))?;
    Ok(Some((BlockMeta { first_doc, last_doc, count, staircase }, n, at)))
}

/// The longest value of a further key column an index holds as its bytes (a term must fit on
/// a page; keys this short keep dictionary pages dense); a longer one is held under a digest
/// of them ([`column_key`]), and a scan naming it rechecks its rows.
pub const MAX_KEY_VALUE_BYTES: usize = 1024;

/// The key under which an index holds a row's value of a further key column (the index's
/// column `column`, from 2): a zero byte, which no analysed term holds, the column's number,
/// then the value's bytes. A value longer than [`MAX_KEY_VALUE_BYTES`] is held as a zero byte,
/// which no text holds, and a digest of its bytes and length:
/// values of one digest share its postings, so those rows are rechecked. A key's postings are
/// the rows holding the value.
pub fn column_key(column: u8, value: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(2 + value.len().min(MAX_KEY_VALUE_BYTES + 1));
    key.push(0);
    key.push(column);
    if value.len() <= MAX_KEY_VALUE_BYTES {
        key.extend_from_slice(value);
    } else {
        key.push(0);
        key.extend_from_slice(&fnv1a(value, 0xcbf2_9ce4_8422_2325).to_le_bytes());
        key.extend_from_slice(&fnv1a(value, 0x6c62_272e_07bb_0142).to_le_bytes());
        key.extend_from_slice(&(value.len() as u64).to_le_bytes());
    }
    key
}

/// Whether a key column's value is held under a digest ([`column_key`]): rows found through
/// it must be rechecked.
pub fn column_value_digested(value: &[u8]) -> bool {
    value.len() > MAX_KEY_VALUE_BYTES
}

/// 64-bit FNV-1a of `bytes` from `basis`: fixed across platforms and releases (it is stored).
fn fnv1a(bytes: &[u8], basis: u64) -> u64 {
    bytes.iter().fold(basis, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// A row of the pending list: its document, length and terms with their frequencies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingDoc {
    pub doc: u64,
    pub len: u32,
    pub terms: Vec<(Vec<u8>, u32)>,
}

impl PendingDoc {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + self.terms.iter().map(|(t, _)| t.len() + 3).sum::<usize>());
        put_varint(&mut out, self.doc);
        put_varint(&mut out, u64::from(self.len));
        put_varint(&mut out, self.terms.len() as u64);
        for (t, tf) in &self.terms {
            put_varint(&mut out, t.len() as u64);
            out.extend_from_slice(t);
            put_varint(&mut out, u64::from(*tf));
        }
        out
    }
}

/// The pending list's rows from its bytes.
pub fn decode_pending(bytes: &[u8]) -> Result<Vec<PendingDoc>, CoreError> {
    let bad = || damaged("a pending row does not decode");
    let mut at = 0;
    let mut out = Vec::new();
    while at < bytes.len() {
        let doc = varint(bytes, &mut at).ok_or_else(bad)?;
        let len = varint_u32(bytes, &mut at).ok_or_else(bad)?;
        let n = varint(bytes, &mut at).ok_or_else(bad)? as usize;
        let mut terms = Vec::with_capacity(n.min(bytes.len()));
        for _ in 0..n {
            let l = varint(bytes, &mut at).ok_or_else(bad)? as usize;
            let t = bytes.get(at..at + l).ok_or_else(bad)?.to_vec();
            at += l;
            terms.push((t, varint_u32(bytes, &mut at).ok_or_else(bad)?));
        }
        out.push(PendingDoc { doc, len, terms });
    }
    Ok(out)
}

/// The pending list's bytes (the rows the metapage counts), and its pages.
pub fn read_pending(src: &mut dyn PageSource, meta: &Meta) -> Result<(Vec<u8>, Vec<u32>), CoreError> {
    let mut bytes = Vec::with_capacity(meta.pending_bytes as usize);
    let mut pages = Vec::new();
    let mut blk = meta.pending_head;
    while blk != NO_PAGE && (bytes.len() as u64) < meta.pending_bytes {
        let page = src.read(blk)?;
        if page.kind != Kind::Pending {
            return Err(damaged(format!("page {blk} of the pending list is not a pending page")));
        }
        pages.push(blk);
        let want = (meta.pending_bytes - bytes.len() as u64) as usize;
        bytes.extend_from_slice(&page.data[..page.data.len().min(want)]);
        if blk == meta.pending_tail {
            break;
        }
        blk = page.next;
    }
    if (bytes.len() as u64) < meta.pending_bytes {
        return Err(damaged("the pending list ends early"));
    }
    Ok((bytes, pages))
}

/// Postings of the given terms among pending rows: one part per term (empty when none).
pub fn pending_postings(docs: &[PendingDoc], terms: &[&[u8]]) -> Vec<TermPostings> {
    let mut per: Vec<Vec<Posting>> = vec![Vec::new(); terms.len()];
    let mut sorted: Vec<&PendingDoc> = docs.iter().collect();
    sorted.sort_by_key(|d| d.doc);
    for d in sorted {
        for (t, tf) in &d.terms {
            for (i, q) in terms.iter().enumerate() {
                if t.as_slice() == *q && per[i].last().is_none_or(|p| p.doc < d.doc) {
                    per[i].push(Posting { doc: d.doc, tf: *tf, len: d.len });
                }
            }
        }
    }
    per.iter().map(|p| TermPostings::build(p)).collect()
}

/// Every term's postings among pending rows, and their documents in order (a flush).
pub fn pending_segment(docs: &[PendingDoc]) -> (BTreeMap<Vec<u8>, TermPostings>, Vec<u64>) {
    let mut sorted: Vec<&PendingDoc> = docs.iter().collect();
    sorted.sort_by_key(|d| d.doc);
    sorted.dedup_by_key(|d| d.doc);
    let mut per: BTreeMap<Vec<u8>, Vec<Posting>> = BTreeMap::new();
    for d in &sorted {
        for (t, tf) in &d.terms {
            let list = per.entry(t.clone()).or_default();
            if list.last().is_none_or(|p| p.doc < d.doc) {
                list.push(Posting { doc: d.doc, tf: *tf, len: d.len });
            }
        }
    }
    (per.into_iter().map(|(t, p)| (t, TermPostings::build(&p))).collect(), sorted.iter().map(|d| d.doc).collect())
}

/// Which segments (oldest first, by their documents) to merge after one was added: the newest
/// ones while each older one is at most twice the newer ones together, so that sizes grow
/// geometrically towards the oldest and a row is merged O(log n) times; all of them when
/// there are more than [`MAX_SEGMENTS`]. None when nothing is to merge.
pub fn merge_plan(docs: &[u64]) -> Option<std::ops::Range<usize>> {
    let n = docs.len();
    if n < 2 {
        return None;
    }
    if n > MAX_SEGMENTS {
        return Some(0..n);
    }
    let mut j = n - 1;
    let mut sum = docs[n - 1];
    while j > 0 && docs[j - 1] <= sum.saturating_mul(2) {
        j -= 1;
        sum += docs[j];
    }
    (j < n - 1).then_some(j..n)
}

/// A segment's terms in order, one dictionary page read at a time.
struct TermCursor<'g> {
    seg: &'g Segment,
    page: usize,
    entries: std::vec::IntoIter<DictEntry>,
    current: Option<DictEntry>,
}

impl<'g> TermCursor<'g> {
    fn new(src: &mut dyn PageSource, seg: &'g Segment) -> Result<TermCursor<'g>, CoreError> {
        let mut c = TermCursor { seg, page: 0, entries: Vec::new().into_iter(), current: None };
        c.advance(src)?;
        Ok(c)
    }

    fn advance(&mut self, src: &mut dyn PageSource) -> Result<(), CoreError> {
        loop {
            if let Some(e) = self.entries.next() {
                self.current = Some(e);
                return Ok(());
            }
            let Some((blk, _)) = self.seg.directory.get(self.page) else {
                self.current = None;
                return Ok(());
            };
            let page = src.read(*blk)?;
            if page.kind != Kind::Dictionary {
                return Err(damaged("the directory points to a page that is not a dictionary page"));
            }
            self.entries = decode_entries(&page.data)?.into_iter();
            self.page += 1;
        }
    }
}

/// Merge segments (their documents never overlap) into one, term by term in a k-way merge of
/// their dictionaries (memory: one term's postings); documents `dead` names are left out
/// (VACUUM).
pub fn merge_segments(
    src: &mut dyn PageSource,
    sink: &mut dyn PageSink,
    segments: &[Segment],
    mut dead: impl FnMut(u64) -> bool,
) -> Result<SegmentRef, CoreError> {
    let mut docs: Vec<u64> = Vec::new();
    let mut dead_docs = std::collections::HashSet::new();
    for s in segments {
        for d in s.docs(src)? {
            if dead(d) {
                dead_docs.insert(d);
            } else {
                docs.push(d);
            }
        }
    }
    docs.sort_unstable();
    let mut cursors = segments.iter().map(|s| TermCursor::new(src, s)).collect::<Result<Vec<_>, _>>()?;
    let mut w = SegmentWriter::new(sink)?;
    while let Some(term) = cursors.iter().filter_map(|c| c.current.as_ref().map(|e| e.term.clone())).min() {
        let mut parts = Vec::new();
        for c in cursors.iter_mut() {
            if c.current.as_ref().is_some_and(|e| e.term == term) {
                let e = c.current.take().expect("checked above");
                parts.push(read_postings(src, &e)?);
                c.advance(src)?;
            }
        }
        let merged = if parts.len() == 1 {
            parts.pop().expect("one part")
        } else {
            TermPostings::merge(&parts.iter().collect::<Vec<_>>())
        };
        let kept =
            if dead_docs.is_empty() { merged } else { merged.without(|d| dead_docs.contains(&d)).unwrap_or(merged) };
        w.add(sink, &term, &kept)?;
    }
    w.finish(sink, &docs)
}

/// Pages in memory (tests, and the reference for the extension's buffer-backed pages).
#[derive(Debug, Default, Clone)]
pub struct MemPages {
    pub pages: Vec<Option<Page>>,
    pub capacity: usize,
}

impl MemPages {
    pub fn new(capacity: usize) -> MemPages {
        MemPages { pages: Vec::new(), capacity }
    }
}

impl PageSource for MemPages {
    fn read(&mut self, blk: u32) -> Result<Page, CoreError> {
        self.pages.get(blk as usize).cloned().flatten().ok_or_else(|| damaged(format!("page {blk} does not exist")))
    }
}

impl PageSink for MemPages {
    fn alloc(&mut self) -> Result<u32, CoreError> {
        self.pages.push(None);
        Ok(self.pages.len() as u32 - 1)
    }
    fn write(&mut self, blk: u32, page: &Page) -> Result<(), CoreError> {
        if page.data.len() > self.capacity {
            return Err(damaged("a page overflows"));
        }
        self.pages[blk as usize] = Some(page.clone());
        Ok(())
    }
    fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Rows as (document, its terms as (term number, frequency), length).
    type Rows = Vec<(u64, Vec<(u8, u32)>, u32)>;

    #[test]
    fn a_long_key_value_is_held_under_a_short_digest_no_short_value_shares() {
        let short = vec![b'k'; MAX_KEY_VALUE_BYTES];
        assert_eq!(column_key(2, &short)[2..], short[..]);
        assert!(!column_value_digested(&short));
        let mut long = vec![b'k'; MAX_KEY_VALUE_BYTES + 1];
        let key = column_key(2, &long);
        assert!(column_value_digested(&long));
        assert_eq!(key.len(), 3 + 24);
        assert_eq!(&key[..3], &[0, 2, 0]);
        // deterministic, and apart for another byte, length or column
        assert_eq!(key, column_key(2, &long));
        assert_ne!(key, column_key(3, &long));
        let mut longer = long.clone();
        longer.push(b'k');
        assert_ne!(key, column_key(2, &longer));
        long[0] = b'j';
        assert_ne!(key, column_key(2, &long));
        // a text holds no zero byte, so no value of at most the limit has a digest's key
        let t = String::from_utf8(vec![b'a'; 40]).unwrap();
        assert_ne!(column_key(2, t.as_bytes())[2], 0);
    }

    fn terms_of(docs: &Rows) -> (BTreeMap<Vec<u8>, TermPostings>, Vec<u64>) {
        let pending: Vec<PendingDoc> = docs
            .iter()
            .map(|(d, ts, len)| PendingDoc {
                doc: *d,
                len: *len,
                terms: ts.iter().map(|(t, tf)| (format!("t{t}").into_bytes(), *tf)).collect(),
            })
            .collect();
        pending_segment(&pending)
    }

    fn docs_strategy() -> impl Strategy<Value = Rows> {
        proptest::collection::vec(
            (1u64..1 << 30, proptest::collection::btree_map(0u8..60, 1u32..9, 1..12), 1u32..300),
            1..400,
        )
        .prop_map(|v| v.into_iter().map(|(d, m, l)| (d, m.into_iter().collect(), l)).collect())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 60, ..ProptestConfig::default() })]
        #[test]
        fn a_segment_reads_back_every_term_and_document(docs in docs_strategy(), cap in 40usize..600) {
            let (terms, ids) = terms_of(&docs);
            let mut pages = MemPages::new(cap);
            let re = write_segment(&mut pages, &terms, &ids).unwrap();
            let seg = Segment::open(&mut pages, re).unwrap();
            prop_assert_eq!(seg.docs(&mut pages).unwrap(), ids);
            for (t, p) in &terms {
                let back = seg.postings(&mut pages, t).unwrap();
                prop_assert_eq!(back.decode_all(), p.decode_all());
                prop_assert_eq!(&back.blocks, &p.blocks);
            }
            prop_assert!(seg.postings(&mut pages, b"absent").unwrap().blocks.is_empty());
            prop_assert!(seg.postings(&mut pages, b"").unwrap().blocks.is_empty());
            let mut seen = Vec::new();
            seg.for_each_term(&mut pages, |t, p| { seen.push((t.to_vec(), p.decode_all())); Ok(()) }).unwrap();
            let want: Vec<_> = terms.iter().map(|(t, p)| (t.clone(), p.decode_all())).collect();
            prop_assert_eq!(seen, want);
            // every page written belongs to the segment
            let mut pages_of = seg.pages(&mut pages).unwrap();
            pages_of.sort_unstable();
            prop_assert_eq!(pages_of, (0..pages.pages.len() as u32).collect::<Vec<_>>());
        }

        #[test]
        fn merging_segments_equals_one_segment_of_all_their_rows(
            docs in docs_strategy(), parts in 1u64..5, dead_mod in 2u64..9, vacuum in any::<bool>(),
        ) {
            let mut pages = MemPages::new(300);
            let mut segs = Vec::new();
            for part in 0..parts {
                let mine: Vec<_> = docs.iter().filter(|d| d.0 % parts == part).cloned().collect();
                let (terms, ids) = terms_of(&mine);
                let re = write_segment(&mut pages, &terms, &ids).unwrap();
                segs.push(Segment::open(&mut pages, re).unwrap());
            }
            let dead = |d: u64| vacuum && d.is_multiple_of(dead_mod);
            let src = &mut pages.clone();
            let re = merge_segments(src, &mut pages, &segs, dead).unwrap();
            let merged = Segment::open(&mut pages, re).unwrap();
            let live: Vec<_> = docs.iter().filter(|d| !dead(d.0)).cloned().collect();
            let (terms, ids) = terms_of(&live);
            prop_assert_eq!(merged.docs(&mut pages).unwrap(), ids);
            let mut seen = BTreeMap::new();
            merged.for_each_term(&mut pages, |t, p| { seen.insert(t.to_vec(), p.decode_all()); Ok(()) }).unwrap();
            let want: BTreeMap<_, _> = terms.iter().map(|(t, p)| (t.clone(), p.decode_all())).collect();
            prop_assert_eq!(seen, want);
        }

        #[test]
        fn pending_rows_round_trip(docs in docs_strategy()) {
            let rows: Vec<PendingDoc> = docs.iter().map(|(d, ts, len)| PendingDoc {
                doc: *d, len: *len, terms: ts.iter().map(|(t, tf)| (vec![*t, b'x'], *tf)).collect(),
            }).collect();
            let bytes: Vec<u8> = rows.iter().flat_map(|r| r.encode()).collect();
            prop_assert_eq!(decode_pending(&bytes).unwrap(), rows);
        }
    }

    #[test]
    fn the_metapage_round_trips_and_refuses_other_bytes() {
        let m = Meta {
            pending_head: 3,
            pending_tail: 9,
            pending_tail_used: 100,
            pending_docs: 12,
            pending_bytes: 70_000,
            segments: vec![SegmentRef {
                postings_head: 1,
                dictionary_head: 2,
                directory: 4,
                dictionary_pages: 2,
                docs_head: 8,
                docs: 5,
                terms: 7,
                postings: 1 << 40,
            }],
            ..Meta::default()
        };
        assert_eq!(Meta::decode(&m.encode()).unwrap(), m);
        assert_eq!(Meta::decode(&[0; 40]).unwrap_err().state, SqlState::IndexCorrupted);
        let mut future = m.encode();
        future[4] = 9;
        assert_eq!(Meta::decode(&future).unwrap_err().state, SqlState::ObjectNotInPrerequisiteState);
    }

    #[test]
    fn a_broken_chain_is_reported_as_damage() {
        let docs = vec![(1, vec![(1, 2)], 5), (7, vec![(1, 1), (2, 1)], 9)];
        let (terms, ids) = terms_of(&docs);
        let mut pages = MemPages::new(12);
        let re = write_segment(&mut pages, &terms, &ids).unwrap();
        let seg = Segment::open(&mut pages, re).unwrap();
        let entry = seg.entry(&mut pages, b"t1").unwrap().unwrap();
        pages.pages[entry.blk as usize].as_mut().unwrap().next = NO_PAGE;
        pages.pages[entry.blk as usize].as_mut().unwrap().data.truncate(2);
        assert_eq!(seg.postings(&mut pages, b"t1").unwrap_err().state, SqlState::IndexCorrupted);
    }

    #[test]
    fn a_block_longer_than_a_block_holds_is_damage_not_a_read_around_a_looping_chain() {
        let header = |n: usize| {
            let mut h = Vec::new();
            for v in [10, 0, 1, 1, 3, 40, n as u64] {
                put_varint(&mut h, v);
            }
            h
        };
        let entry = DictEntry { term: b"t".to_vec(), df: 1, blocks: 1, blk: 0, off: 0 };
        for (n, ok) in [(MAX_BLOCK_BYTES + 1, false), (3, true)] {
            let mut pages = MemPages::new(64);
            let mut data = header(n);
            // the page's next is itself: only the length check ends a read of the first block
            data.extend_from_slice(&[0, 3, 40]);
            pages.pages.push(Some(Page { kind: Kind::Postings, next: 0, data }));
            match read_postings(&mut pages, &entry) {
                Ok(t) => {
                    assert!(ok, "read a block of {n} bytes");
                    assert_eq!(t.decode_all(), vec![Posting { doc: 10, tf: 3, len: 40 }]);
                }
                Err(e) => {
                    assert!(!ok, "{e:?}");
                    assert_eq!(e.state, SqlState::IndexCorrupted);
                }
            }
        }
    }

    #[test]
    fn segments_merge_when_a_newer_run_reaches_half_an_older_one() {
        assert_eq!(merge_plan(&[]), None);
        assert_eq!(merge_plan(&[100]), None);
        assert_eq!(merge_plan(&[100, 10]), None);
        assert_eq!(merge_plan(&[100, 50]), Some(0..2));
        assert_eq!(merge_plan(&[1000, 40, 20]), Some(1..3));
        assert_eq!(merge_plan(&[1000, 100, 40, 20]), Some(1..4));
        assert_eq!(merge_plan(&[1000, 500, 300, 200]), Some(0..4));
        assert_eq!(merge_plan(&[1 << 40; MAX_SEGMENTS + 1]), Some(0..MAX_SEGMENTS + 1));
        // a stream of equal flushes keeps O(log n) segments
        let mut segs: Vec<u64> = Vec::new();
        for _ in 0..10_000 {
            segs.push(8);
            while let Some(r) = merge_plan(&segs) {
                let sum = segs[r.clone()].iter().sum();
                segs.truncate(r.start);
                segs.push(sum);
            }
            assert!(segs.len() <= 16, "{segs:?}");
        }
        assert_eq!(segs.iter().sum::<u64>(), 80_000);
    }

    #[test]
    fn a_segment_without_terms_still_lists_its_documents() {
        let mut pages = MemPages::new(100);
        let re = write_segment(&mut pages, &BTreeMap::new(), &[1, 5]).unwrap();
        assert_eq!((re.docs, re.terms, re.postings, re.dictionary_pages), (2, 0, 0, 0));
        let seg = Segment::open(&mut pages, re).unwrap();
        assert!(seg.postings(&mut pages, b"x").unwrap().blocks.is_empty());
        assert_eq!(seg.docs(&mut pages).unwrap(), vec![1, 5]);
        assert_eq!(seg.pages(&mut pages).unwrap().len(), pages.pages.len());
    }
}
