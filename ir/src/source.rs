//! Source files, spans and line/column lookup.
//!
//! A [`Span`] is three `u32`s (file, start, end), so every op and operand can
//! carry one without weighing down the IR. Line and column numbers are computed
//! on demand from a lazily built line index.

use std::sync::OnceLock;

/// Index of a file in a [`SourceMap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct FileId(pub u32);

/// A byte range in one source file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Span {
    /// The file the range lies in.
    pub file: FileId,
    /// First byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl Span {
    /// A span in `file` covering `start..end`.
    pub fn new(file: FileId, start: u32, end: u32) -> Self {
        Span { file, start, end }
    }

    /// The smallest span covering both `self` and `other` (same file).
    pub fn to(self, other: Span) -> Span {
        Span {
            file: self.file,
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

/// One source file: its display name, its text and a lazily built line index.
#[derive(Debug)]
pub struct SourceFile {
    name: String,
    text: String,
    line_starts: OnceLock<Vec<u32>>,
}

impl SourceFile {
    /// The name shown in diagnostics (`k.apir`, `<stdin>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The whole text.
    pub fn text(&self) -> &str {
        &self.text
    }

    fn line_starts(&self) -> &[u32] {
        self.line_starts.get_or_init(|| {
            let mut starts = vec![0u32];
            starts.extend(
                self.text
                    .bytes()
                    .enumerate()
                    .filter(|&(_, b)| b == b'\n')
                    .map(|(i, _)| i as u32 + 1),
            );
            starts
        })
    }

    /// 1-based line and column (in characters) of byte `offset`.
    pub fn line_col(&self, offset: u32) -> (u32, u32) {
        let starts = self.line_starts();
        let line = match starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let start = starts[line] as usize;
        let end = (offset as usize).min(self.text.len());
        let col = self
            .text
            .get(start..end)
            .map_or(end - start, |s| s.chars().count());
        (line as u32 + 1, col as u32 + 1)
    }

    /// Byte offset where 1-based `line` starts, if the file has that line.
    pub fn line_start(&self, line: u32) -> Option<u32> {
        self.line_starts()
            .get(line.checked_sub(1)? as usize)
            .copied()
    }
}

/// The files a compilation reads. Diagnostics refer to them by [`FileId`].
#[derive(Debug, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

/// The largest source file accepted: spans are 32-bit offsets.
pub const MAX_SOURCE_BYTES: usize = u32::MAX as usize - 1;

impl SourceMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a file and returns its id.
    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> FileId {
        let id = FileId(self.files.len() as u32);
        self.files.push(SourceFile {
            name: name.into(),
            text: text.into(),
            line_starts: OnceLock::new(),
        });
        id
    }

    /// The file with id `id`.
    ///
    /// # Panics
    /// If `id` was not returned by this map's [`SourceMap::add`].
    pub fn file(&self, id: FileId) -> &SourceFile {
        &self.files[id.0 as usize]
    }

    /// The file with id `id`, if any.
    pub fn get(&self, id: FileId) -> Option<&SourceFile> {
        self.files.get(id.0 as usize)
    }

    /// All files, in id order.
    pub fn files(&self) -> impl Iterator<Item = (FileId, &SourceFile)> {
        self.files
            .iter()
            .enumerate()
            .map(|(i, f)| (FileId(i as u32), f))
    }

    /// `file:line:col` of the start of `span`.
    pub fn location(&self, span: Span) -> String {
        match self.get(span.file) {
            Some(f) => {
                let (l, c) = f.line_col(span.start);
                format!("{}:{}:{}", f.name, l, c)
            }
            None => "<unknown>".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_from_one() {
        let mut sm = SourceMap::new();
        let f = sm.add("a.apir", "ab\ncd\n\nx");
        let file = sm.file(f);
        assert_eq!(file.line_col(0), (1, 1));
        assert_eq!(file.line_col(1), (1, 2));
        assert_eq!(file.line_col(3), (2, 1));
        assert_eq!(file.line_col(7), (4, 1));
        assert_eq!(sm.location(Span::new(f, 4, 5)), "a.apir:2:2");
        assert_eq!(file.line_start(3), Some(6));
        assert_eq!(file.line_start(9), None);
    }
}
