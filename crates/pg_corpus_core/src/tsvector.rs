//! Reading and writing PostgreSQL's `tsvector`, the on-disk form of pg_corpus' lexical index
//! terms (a GIN index over it finds candidates; the positions give term frequencies).
//!
//! Binary layout (src/include/tsearch/ts_type.h): `int32 vl_len_; int32 size; WordEntry
//! entries[size]; char lexemes[]`, where a WordEntry is a uint32 bitfield `haspos:1, len:11,
//! pos:20` (little-endian GCC order: bit 0, bits 1–11, bits 12–31), `pos` is the lexeme's
//! offset in `lexemes`, and when `haspos` a `uint16 npos; uint16 positions[npos]` vector follows
//! the lexeme at the next 2-byte boundary. A position is `weight:2 (A=3 … D=0) | pos:14`.
//! Entries are sorted by (bytes, then length).

use std::cmp::Ordering;

/// pg_corpus marks the positions of extra keys (Hebrew forms without prefix letters, Czech
/// prefix keys) with weight label C; a word's own key keeps the default D. The BM25 document
/// length counts D positions only.
pub const EXTRA_LABEL: char = 'C';

/// Largest position PostgreSQL stores (later positions are clamped to it).
pub const MAX_POSITION: u32 = 16383;

/// A borrowed, validated tsvector (the detoasted varlena, header included).
pub struct TsVector<'a> {
    data: &'a [u8],
    size: usize,
    /// Positions labelled D over all lexemes, counted while validating.
    surface: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    pub lexeme: &'a [u8],
    /// Number of positions (a lexeme stored without positions counts once).
    pub npos: u32,
    /// Positions labelled D (a word's own key): its share of the document length.
    pub surface: u32,
}

fn u32_at(d: &[u8], off: usize) -> Option<u32> {
    d.get(off..off + 4).map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

fn u16_at(d: &[u8], off: usize) -> Option<u16> {
    d.get(off..off + 2).map(|b| u16::from_ne_bytes([b[0], b[1]]))
}

impl<'a> TsVector<'a> {
    /// Wrap a detoasted tsvector varlena (4-byte header). None if it is malformed.
    pub fn parse(data: &'a [u8]) -> Option<TsVector<'a>> {
        let size = u32_at(data, 4)? as usize;
        let strings = 8usize.checked_add(size.checked_mul(4)?)?;
        if strings > data.len() {
            return None;
        }
        let mut v = TsVector { data, size, surface: 0 };
        // Validate every entry once so that lookups cannot read out of bounds; count the
        // document length on the way (this loop is most of the cost of scoring a candidate).
        let mut surface = 0u32;
        for i in 0..size {
            let (_, positions) = v.raw_entry(i)?;
            surface = surface.saturating_add(match positions {
                None => 1,
                Some(p) => surface_positions(p),
            });
        }
        v.surface = surface;
        Some(v)
    }

    pub fn len(&self) -> usize {
        self.size
    }

    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    fn strings(&self) -> usize {
        8 + self.size * 4
    }

    /// The i-th entry's lexeme and, when it has positions, their raw bytes (2 per position),
    /// bounds-checked.
    fn raw_entry(&self, i: usize) -> Option<(&'a [u8], Option<&'a [u8]>)> {
        let word = u32_at(self.data, 8 + i * 4)?;
        let len = ((word >> 1) & 0x7ff) as usize;
        let pos = (word >> 12) as usize;
        let start = self.strings().checked_add(pos)?;
        let lexeme = self.data.get(start..start.checked_add(len)?)?;
        if word & 1 == 0 {
            return Some((lexeme, None));
        }
        let mut off = pos + len;
        off += off & 1; // SHORTALIGN, relative to the (4-aligned) string area
        let base = self.strings() + off;
        let npos = u16_at(self.data, base)? as usize;
        let positions = self.data.get(base + 2..(base + 2).checked_add(2 * npos)?)?;
        Some((lexeme, Some(positions)))
    }

    /// The i-th lexeme alone (for the binary search), bounds-checked.
    fn lexeme(&self, i: usize) -> Option<&'a [u8]> {
        let word = u32_at(self.data, 8 + i * 4)?;
        let len = ((word >> 1) & 0x7ff) as usize;
        let start = self.strings().checked_add((word >> 12) as usize)?;
        self.data.get(start..start.checked_add(len)?)
    }

    /// The i-th entry, bounds-checked.
    pub fn entry(&self, i: usize) -> Option<Entry<'a>> {
        let (lexeme, positions) = self.raw_entry(i)?;
        Some(match positions {
            None => Entry { lexeme, npos: 1, surface: 1 },
            Some(p) => Entry { lexeme, npos: (p.len() / 2) as u32, surface: surface_positions(p) },
        })
    }

    /// The i-th entry's lexeme and its number of positions (0 for a lexeme stored without
    /// positions, as `cardinality(positions)` of `unnest(tsvector)` is NULL for it).
    pub fn entry_tf(&self, i: usize) -> Option<(&'a [u8], u32)> {
        let (lexeme, positions) = self.raw_entry(i)?;
        Some((lexeme, positions.map_or(0, |p| (p.len() / 2) as u32)))
    }

    /// Binary search for a lexeme (PostgreSQL's order: bytes, then length).
    pub fn find(&self, key: &[u8]) -> Option<Entry<'a>> {
        let (mut lo, mut hi) = (0usize, self.size);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match compare(self.lexeme(mid)?, key) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return self.entry(mid),
            }
        }
        None
    }

    /// The BM25 document length: positions labelled D over all lexemes.
    pub fn surface_length(&self) -> u32 {
        self.surface
    }
}

/// Positions labelled D (weight bits 0) among raw positions (2 bytes each, native order).
fn surface_positions(raw: &[u8]) -> u32 {
    raw.chunks_exact(2).filter(|p| u16::from_ne_bytes([p[0], p[1]]) >> 14 == 0).count() as u32
}

/// tsCompareString without prefix matching.
pub fn compare(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    a[..n].cmp(&b[..n]).then(a.len().cmp(&b.len()))
}

/// Quote a lexeme for tsvector/tsquery input: single quotes, with `'` and `\` doubled/escaped.
pub fn quote_lexeme(lexeme: &str) -> String {
    crate::sql::quote_escaped(lexeme)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Encode (lexeme, positions with labels) the way PostgreSQL lays a tsvector out; entries
    /// must be given in PostgreSQL's order.
    pub fn encode(entries: &[(&str, &[(u16, u8)])]) -> Vec<u8> {
        let mut strings: Vec<u8> = Vec::new();
        let mut words = Vec::new();
        for (lexeme, positions) in entries {
            let pos = strings.len() as u32;
            strings.extend_from_slice(lexeme.as_bytes());
            let haspos = !positions.is_empty();
            if haspos {
                if strings.len() % 2 == 1 {
                    strings.push(0);
                }
                strings.extend_from_slice(&(positions.len() as u16).to_ne_bytes());
                for (p, w) in positions.iter() {
                    strings.extend_from_slice(&(((*w as u16) << 14) | p).to_ne_bytes());
                }
            }
            words.push((haspos as u32) | ((lexeme.len() as u32) << 1) | (pos << 12));
        }
        let mut out = vec![0u8; 4];
        out.extend_from_slice(&(entries.len() as u32).to_ne_bytes());
        for w in words {
            out.extend_from_slice(&w.to_ne_bytes());
        }
        out.extend_from_slice(&strings);
        let len = out.len() as u32;
        out[..4].copy_from_slice(&(len << 2).to_ne_bytes());
        out
    }

    #[test]
    fn reads_entries_positions_and_labels() {
        let data = encode(&[("ab", &[(1, 0), (4, 0)]), ("abc", &[(2, 1)]), ("b", &[]), ("zz", &[(3, 0)])]);
        let v = TsVector::parse(&data).unwrap();
        assert_eq!(v.len(), 4);
        let e = v.find(b"ab").unwrap();
        assert_eq!((e.npos, e.surface), (2, 2));
        let e = v.find(b"abc").unwrap();
        assert_eq!((e.npos, e.surface), (1, 0));
        assert_eq!(v.find(b"b").unwrap().npos, 1);
        assert!(v.find(b"a").is_none());
        assert!(v.find(b"zzz").is_none());
        assert_eq!(v.surface_length(), 2 + 1 + 1); // ab 2, abc none, b 1, zz 1
    }

    #[test]
    fn rejects_truncated_input() {
        let data = encode(&[("hello", &[(1, 0)])]);
        for cut in 0..data.len() {
            assert!(TsVector::parse(&data[..cut]).is_none(), "cut at {cut}");
        }
        let empty = encode(&[]);
        assert!(TsVector::parse(&empty).unwrap().is_empty());
    }

    #[test]
    fn quoting() {
        assert_eq!(quote_lexeme("it's"), "'it''s'");
        assert_eq!(quote_lexeme("a\\b"), "'a\\\\b'");
        assert_eq!(compare(b"ab", b"abc"), Ordering::Less);
        assert_eq!(compare(b"b", b"abc"), Ordering::Greater);
    }

    proptest::proptest! {
        /// Lookups and the document length agree with the entries they were encoded from,
        /// whatever the lexemes, positions and labels.
        #[test]
        fn lookups_and_length_follow_the_encoding(
            words in proptest::collection::btree_map("[a-e]{1,4}", proptest::collection::vec((1u16..500, 0u8..4), 0..6), 0..12),
            probe in "[a-e]{1,4}",
        ) {
            // a BTreeMap of strings of one alphabet is in PostgreSQL's order (bytes, then length)
            let entries: Vec<(&str, &[(u16, u8)])> = words.iter().map(|(k, v)| (k.as_str(), v.as_slice())).collect();
            let data = encode(&entries);
            let v = TsVector::parse(&data).unwrap();
            let surface = |p: &[(u16, u8)]| if p.is_empty() { 1 } else { p.iter().filter(|(_, w)| *w == 0).count() as u32 };
            proptest::prop_assert_eq!(v.surface_length(), words.values().map(|p| surface(p)).sum::<u32>());
            for (k, p) in &words {
                let e = v.find(k.as_bytes()).unwrap();
                proptest::prop_assert_eq!(e.npos, p.len().max(1) as u32);
                proptest::prop_assert_eq!(e.surface, surface(p));
            }
            proptest::prop_assert_eq!(v.find(probe.as_bytes()).is_some(), words.contains_key(&probe));
            for cut in 0..data.len() {
                proptest::prop_assert!(TsVector::parse(&data[..cut]).is_none(), "cut at {}", cut);
            }
        }
    }
}
