//! The BM25 index's pages in shared buffers: reading, writing through generic WAL records, and
//! allocating (a page freed by an earlier change first, else a new one at the end).
//!
//! Locking rules (every change of the index follows them):
//! - the metapage's buffer lock: readers hold it shared while they read what it points to, so a
//!   page they read is never freed meanwhile; a change of the pending list or of the segment
//!   list holds it exclusively while it rewrites the metapage;
//! - a heavyweight lock on the metapage's block (`LockPage`): held by whoever replaces segments
//!   (merges, VACUUM), so that segments it reads stay until it swaps them;
//! - every page allocation happens under one of the two, and the pass that gives freed pages
//!   back to the free space map holds both.

use pg_corpus_core::bm25_index::{damaged, Kind, Meta, Page, PageSink, PageSource, NO_PAGE};
use pg_corpus_core::CoreError;
use pgrx::pg_sys;

/// The page header's size (SizeOfPageHeaderData, already a multiple of MAXALIGN).
const HEADER: usize = std::mem::offset_of!(pg_sys::PageHeaderData, pd_linp);

/// The special space of every page: its kind and the next page of its chain.
#[repr(C)]
#[derive(Clone, Copy)]
struct Special {
    kind: u16,
    flags: u16,
    next: u32,
}

const SPECIAL: usize = std::mem::size_of::<Special>();

/// Bytes of data a page holds.
pub const CAPACITY: usize = pg_sys::BLCKSZ as usize - HEADER - SPECIAL;

pub const META_BLOCK: u32 = 0;

/// # Safety
/// `page` must point to a pinned buffer's page.
unsafe fn page_header(page: pg_sys::Page) -> *mut pg_sys::PageHeaderData {
    page as *mut pg_sys::PageHeaderData
}

/// A page's contents, or None for a page never written (all zeros) or not of this index.
///
/// # Safety
/// `page` must point to a pinned, locked buffer's page.
unsafe fn decode(page: pg_sys::Page) -> Option<Page> {
    let mut out = Page { kind: Kind::Free, next: NO_PAGE, data: Vec::new() };
    // SAFETY: as decode_into's.
    unsafe { decode_into(page, &mut out) }.then_some(out)
}

/// [`decode`] into `out`, reusing its buffer; false (and `out` unspecified) when the page is
/// not one of the index's.
///
/// # Safety
/// As [`decode`]'s.
unsafe fn decode_into(page: pg_sys::Page, out: &mut Page) -> bool {
    out.data.clear();
    // SAFETY: as view's.
    match unsafe { view(page, &mut out.data) } {
        Some((kind, next)) => {
            out.kind = kind;
            out.next = next;
            true
        }
        None => false,
    }
}

/// A page's kind and next page, its used bytes appended to `data`; None when it is not a page
/// of the index.
///
/// # Safety
/// As [`decode`]'s.
unsafe fn view(page: pg_sys::Page, data: &mut Vec<u8>) -> Option<(Kind, u32)> {
    unsafe {
        let h = page_header(page);
        if (*h).pd_upper == 0 || (*h).pd_special as usize != pg_sys::BLCKSZ as usize - SPECIAL {
            return None;
        }
        let sp = *((page as *const u8).add((*h).pd_special as usize) as *const Special);
        let kind = Kind::from_u16(sp.kind)?;
        let len = ((*h).pd_lower as usize).checked_sub(HEADER)?.min(CAPACITY);
        data.extend_from_slice(std::slice::from_raw_parts((page as *const u8).add(HEADER), len));
        Some((kind, sp.next))
    }
}

/// Write `p` over a page (initialised afresh).
///
/// # Safety
/// `page` must be a page image returned by GenericXLogRegisterBuffer.
unsafe fn fill(page: pg_sys::Page, p: &Page) {
    unsafe {
        pg_sys::PageInit(page, pg_sys::BLCKSZ as usize, SPECIAL);
        let h = page_header(page);
        std::ptr::copy_nonoverlapping(p.data.as_ptr(), (page as *mut u8).add(HEADER), p.data.len());
        (*h).pd_lower = (HEADER + p.data.len()) as u16;
        let sp = (page as *mut u8).add((*h).pd_special as usize) as *mut Special;
        *sp = Special { kind: p.kind as u16, flags: 0, next: p.next };
    }
}

/// Write `p` over the page of a buffer the caller has pinned and locked exclusively (a page
/// the caller then WAL-logs itself).
///
/// # Safety
/// `buf` must be pinned and exclusively locked by this backend.
pub unsafe fn fill_buffer(buf: pg_sys::Buffer, p: &Page) {
    unsafe { fill(pg_sys::BufferGetPage(buf), p) }
}

/// A buffer pinned and locked, released when dropped (also when an error unwinds).
pub struct Locked {
    pub buf: pg_sys::Buffer,
}

impl Locked {
    /// # Safety
    /// `rel` must be an open index relation and `blk` one of its blocks.
    pub unsafe fn new(rel: pg_sys::Relation, blk: u32, exclusive: bool) -> Locked {
        unsafe {
            let buf = pg_sys::ReadBufferExtended(
                rel,
                pg_sys::ForkNumber::MAIN_FORKNUM,
                blk,
                pg_sys::ReadBufferMode::RBM_NORMAL,
                std::ptr::null_mut(),
            );
            let mode = if exclusive { pg_sys::BUFFER_LOCK_EXCLUSIVE } else { pg_sys::BUFFER_LOCK_SHARE };
            pg_sys::LockBuffer(buf, mode as i32);
            Locked { buf }
        }
    }

    pub fn page(&self) -> Option<Page> {
        // SAFETY: the buffer is pinned and locked while self lives.
        unsafe { decode(pg_sys::BufferGetPage(self.buf)) }
    }

    /// The page's kind and next page, its used bytes appended to `data`; None when it is not
    /// a page of the index.
    pub fn append_to(&self, data: &mut Vec<u8>) -> Option<(Kind, u32)> {
        // SAFETY: the buffer is pinned and locked while self lives.
        unsafe { view(pg_sys::BufferGetPage(self.buf), data) }
    }

    /// [`Self::page`] into `out`'s buffer; false when it is not a page of the index.
    pub fn page_into(&self, out: &mut Page) -> bool {
        // SAFETY: the buffer is pinned and locked while self lives.
        unsafe { decode_into(pg_sys::BufferGetPage(self.buf), out) }
    }

    pub fn meta(&self) -> Result<Meta, CoreError> {
        match self.page() {
            Some(p) if p.kind == Kind::Meta => Meta::decode(&p.data),
            _ => Err(damaged("block 0 is not a BM25 index metapage")),
        }
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        // SAFETY: the buffer was pinned and locked by Locked::new. During an ERROR's unwind
        // PostgreSQL releases buffer locks and pins itself; releasing them first is harmless
        // only when they are still held, which the abort has not yet undone when Rust unwinds.
        unsafe { pg_sys::UnlockReleaseBuffer(self.buf) }
    }
}

/// Write page images over locked buffers in one WAL record (at most four).
///
/// # Safety
/// `rel` must be the buffers' index relation; each buffer pinned and exclusively locked.
pub unsafe fn log_pages(rel: pg_sys::Relation, pages: &[(&Locked, &Page)]) {
    debug_assert!(pages.len() <= 4);
    unsafe {
        let state = pg_sys::GenericXLogStart(rel);
        for (b, p) in pages {
            let image = pg_sys::GenericXLogRegisterBuffer(state, b.buf, pg_sys::GENERIC_XLOG_FULL_IMAGE as i32);
            fill(image, p);
        }
        pg_sys::GenericXLogFinish(state);
    }
}

/// The index's pages, read and written one at a time.
pub struct IndexPages {
    pub rel: pg_sys::Relation,
    /// The relation's size when last asked (it only grows while a reader holds the metapage).
    known_blocks: u32,
}

impl IndexPages {
    pub fn new(rel: pg_sys::Relation) -> IndexPages {
        IndexPages { rel, known_blocks: 0 }
    }

    /// Mark pages free (each written as an empty page of kind Free) and give them to the free
    /// space map.
    pub fn free(&mut self, pages: &[u32]) {
        for &blk in pages {
            if blk == META_BLOCK {
                continue;
            }
            // SAFETY: blk is a block of this index, no longer reachable from the metapage.
            unsafe {
                let b = Locked::new(self.rel, blk, true);
                let page = Page { kind: Kind::Free, next: NO_PAGE, data: Vec::new() };
                log_pages(self.rel, &[(&b, &page)]);
                drop(b);
                pg_sys::RecordFreeIndexPage(self.rel, blk);
            }
        }
    }

    /// Blocks of the index's main fork.
    pub fn blocks(&self) -> u32 {
        // SAFETY: rel is an open relation.
        unsafe { pg_sys::RelationGetNumberOfBlocksInFork(self.rel, pg_sys::ForkNumber::MAIN_FORKNUM) }
    }

    /// Block `blk` share-locked, once it is known to lie within the index.
    fn locked(&mut self, blk: u32) -> Result<Locked, CoreError> {
        if blk >= self.known_blocks {
            self.known_blocks = self.blocks();
        }
        if blk >= self.known_blocks {
            return Err(damaged(format!("a chain points past the end of the index (block {blk})")));
        }
        // SAFETY: blk is within the relation.
        Ok(unsafe { Locked::new(self.rel, blk, false) })
    }
}

fn not_a_page(blk: u32) -> CoreError {
    damaged(format!("block {blk} is not a page of the index"))
}

impl PageSource for IndexPages {
    fn read(&mut self, blk: u32) -> Result<Page, CoreError> {
        let mut page = Page { kind: Kind::Free, next: NO_PAGE, data: Vec::new() };
        self.read_into(blk, &mut page)?;
        Ok(page)
    }

    fn read_into(&mut self, blk: u32, page: &mut Page) -> Result<(), CoreError> {
        if self.locked(blk)?.page_into(page) {
            Ok(())
        } else {
            Err(not_a_page(blk))
        }
    }

    fn append(&mut self, blk: u32, out: &mut Vec<u8>) -> Result<(Kind, u32), CoreError> {
        self.locked(blk)?.append_to(out).ok_or_else(|| not_a_page(blk))
    }
}

impl PageSink for IndexPages {
    fn alloc(&mut self) -> Result<u32, CoreError> {
        // SAFETY: rel is an open index relation; the caller holds a lock that excludes every
        // other allocator's use of the free space map's pages (module rules).
        unsafe {
            loop {
                let blk = pg_sys::GetFreeIndexPage(self.rel);
                if blk == pg_sys::InvalidBlockNumber {
                    break;
                }
                let b = Locked::new(self.rel, blk, false);
                if b.page().is_some_and(|p| p.kind == Kind::Free) {
                    return Ok(blk);
                }
            }
            pg_sys::LockRelationForExtension(self.rel, pg_sys::ExclusiveLock as i32);
            let buf = pg_sys::ReadBufferExtended(
                self.rel,
                pg_sys::ForkNumber::MAIN_FORKNUM,
                pg_sys::InvalidBlockNumber,
                pg_sys::ReadBufferMode::RBM_NORMAL,
                std::ptr::null_mut(),
            );
            pg_sys::UnlockRelationForExtension(self.rel, pg_sys::ExclusiveLock as i32);
            let blk = pg_sys::BufferGetBlockNumber(buf);
            pg_sys::ReleaseBuffer(buf);
            Ok(blk)
        }
    }

    fn write(&mut self, blk: u32, page: &Page) -> Result<(), CoreError> {
        // SAFETY: blk was allocated by this writer; nobody else reaches it yet.
        unsafe {
            let b = Locked::new(self.rel, blk, true);
            log_pages(self.rel, &[(&b, page)]);
        }
        Ok(())
    }

    fn capacity(&self) -> usize {
        CAPACITY
    }
}

/// Pages in a temporary file (a build's sorted runs, merged into the index afterwards), so
/// that the index itself holds only the final segment.
pub struct TempPages {
    file: *mut pg_sys::BufFile,
    next: u32,
}

const TEMP_HEADER: usize = 12;

impl TempPages {
    pub fn new() -> TempPages {
        // SAFETY: a temporary file of this transaction, closed when dropped (or at its end).
        TempPages { file: unsafe { pg_sys::BufFileCreateTemp(false) }, next: 0 }
    }
}

impl Drop for TempPages {
    fn drop(&mut self) {
        // SAFETY: the file BufFileCreateTemp returned; an aborting transaction closes it itself
        // before Rust unwinds only when it is not closed here.
        unsafe { pg_sys::BufFileClose(self.file) }
    }
}

impl PageSource for TempPages {
    fn read(&mut self, blk: u32) -> Result<Page, CoreError> {
        let mut image = vec![0u8; pg_sys::BLCKSZ as usize];
        // SAFETY: the file is open; the buffer holds one block.
        let got = unsafe {
            if pg_sys::BufFileSeekBlock(self.file, blk as _) != 0 {
                0
            } else {
                pg_sys::BufFileRead(self.file, image.as_mut_ptr() as *mut std::ffi::c_void, image.len())
            }
        };
        let bad = || damaged(format!("block {blk} of a build's temporary file does not read back"));
        if got != image.len() {
            return Err(bad());
        }
        let kind = Kind::from_u16(u16::from_le_bytes([image[0], image[1]])).ok_or_else(bad)?;
        let next = u32::from_le_bytes(image[4..8].try_into().expect("four bytes"));
        let len = u32::from_le_bytes(image[8..12].try_into().expect("four bytes")) as usize;
        if len > CAPACITY {
            return Err(bad());
        }
        Ok(Page { kind, next, data: image[TEMP_HEADER..TEMP_HEADER + len].to_vec() })
    }
}

impl PageSink for TempPages {
    fn alloc(&mut self) -> Result<u32, CoreError> {
        self.next += 1;
        Ok(self.next - 1)
    }

    fn write(&mut self, blk: u32, page: &Page) -> Result<(), CoreError> {
        let mut image = vec![0u8; pg_sys::BLCKSZ as usize];
        image[0..2].copy_from_slice(&(page.kind as u16).to_le_bytes());
        image[4..8].copy_from_slice(&page.next.to_le_bytes());
        image[8..12].copy_from_slice(&(page.data.len() as u32).to_le_bytes());
        image[TEMP_HEADER..TEMP_HEADER + page.data.len()].copy_from_slice(&page.data);
        // SAFETY: the file is open; blocks are written at their own offsets (a block past the
        // end extends the file).
        unsafe {
            if pg_sys::BufFileSeekBlock(self.file, blk as _) != 0 {
                return Err(damaged(format!("block {blk} of a build's temporary file cannot be written")));
            }
            pg_sys::BufFileWrite(self.file, image.as_ptr() as *mut std::ffi::c_void as _, image.len());
        }
        Ok(())
    }

    fn capacity(&self) -> usize {
        CAPACITY
    }
}
