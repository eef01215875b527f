//! One column of the request table, held in memory or in a spill file the kernel pages.
//!
//! A run of a whole day is tens of millions of rows at 151 bytes each (BENCHMARKS.md, "Where the
//! memory goes"): more than a laptop or a small CI runner has. A table larger than its budget
//! ([`crate::load::Options::table_memory`]) keeps its numeric columns in files instead: each
//! column is a file of its own, created empty in the spill folder, removed from the folder at once
//! where the system allows it (so nothing is left behind, even after a crash), and mapped
//! read-write. Its pages are then the kernel's to keep or write back and drop: file-backed and
//! reclaimable, where the same column on the heap is anonymous memory that, without swap, must
//! stay resident for the whole analysis. Every reader sees a plain slice either way, so the
//! numbers cannot depend on where the table lives; the tests analyze every golden journal both
//! ways and require the same bytes.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use bytemuck::Pod;
use memmap2::MmapMut;

/// Where a table's columns live.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Place {
    /// On the heap.
    #[default]
    Heap,
    /// In spill files created in this folder.
    Spilled(PathBuf),
}

/// A column of plain numbers: a `Vec` or a mapped spill file, read and written as a slice.
pub struct Column<T: Pod> {
    data: Data<T>,
}

enum Data<T> {
    Heap(Vec<T>),
    Spilled(Spill),
}

/// A mapped spill file holding `len` values.
struct Spill {
    map: MmapMut,
    len: usize,
    /// The file's path while it still has one (systems that cannot remove an open file).
    path: Option<PathBuf>,
}

impl Drop for Spill {
    fn drop(&mut self) {
        if let Some(path) = self.path.take() {
            // The map must go first on systems that keep an open file from being removed; it is
            // dropped right after this body, so the removal is only tried here and a failure
            // leaves a file named `.percentes-spill-*` in the spill folder, nothing worse.
            let _ = std::fs::remove_file(path);
        }
    }
}

impl<T: Pod> Default for Column<T> {
    fn default() -> Self {
        Column {
            data: Data::Heap(Vec::new()),
        }
    }
}

impl<T: Pod> From<Vec<T>> for Column<T> {
    fn from(values: Vec<T>) -> Self {
        Column {
            data: Data::Heap(values),
        }
    }
}

impl<T: Pod + fmt::Debug> fmt::Debug for Column<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let place = match &self.data {
            Data::Heap(_) => "heap",
            Data::Spilled(_) => "spilled",
        };
        if self.len() <= 16 {
            write!(f, "Column({place}, {:?})", &self[..])
        } else {
            write!(f, "Column({place}, {} values)", self.len())
        }
    }
}

impl<T: Pod + PartialEq> PartialEq for Column<T> {
    fn eq(&self, other: &Self) -> bool {
        self[..] == other[..]
    }
}

impl<T: Pod> Deref for Column<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match &self.data {
            Data::Heap(values) => values,
            Data::Spilled(spill) => {
                bytemuck::cast_slice(&spill.map[..spill.len * std::mem::size_of::<T>()])
            }
        }
    }
}

impl<T: Pod> DerefMut for Column<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.data {
            Data::Heap(values) => values,
            Data::Spilled(spill) => {
                bytemuck::cast_slice_mut(&mut spill.map[..spill.len * std::mem::size_of::<T>()])
            }
        }
    }
}

impl<'a, T: Pod> IntoIterator for &'a Column<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Why a spill file could not be made.
#[derive(Debug)]
pub struct SpillError {
    /// The spill folder.
    pub dir: PathBuf,
    /// What the operating system said.
    pub source: std::io::Error,
}

impl fmt::Display for SpillError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot spill the request table to {}: {} (choose a folder on a disk with room with \
             --spill-dir, or give the table more memory with --table-memory)",
            self.dir.display(),
            self.source
        )
    }
}

impl std::error::Error for SpillError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

impl<T: Pod> Column<T> {
    /// `len` copies of `value`, in `place`.
    pub fn filled(len: usize, value: T, place: &Place) -> Result<Column<T>, SpillError> {
        match place {
            Place::Heap => Ok(vec![value; len].into()),
            Place::Spilled(dir) => {
                let mut column = Column::spilled_zeroed(len, dir)?;
                if bytemuck::bytes_of(&value).iter().any(|&b| b != 0) {
                    column.fill(value);
                    // Written, not needed again until its rows are: out of the resident set.
                    column.release();
                }
                Ok(column)
            }
        }
    }

    /// Appends a value; only a heap column grows (a table is built on the heap, then spilled).
    ///
    /// # Panics
    /// On a spilled column: a programming error, not something input can cause.
    pub fn push(&mut self, value: T) {
        match &mut self.data {
            Data::Heap(values) => values.push(value),
            Data::Spilled(_) => panic!("a spilled column does not grow"),
        }
    }

    /// Moves the values into a spill file in `dir` (nothing happens to an empty column).
    pub fn spill(&mut self, dir: &Path) -> Result<(), SpillError> {
        let Data::Heap(values) = &self.data else {
            return Ok(());
        };
        if values.is_empty() {
            return Ok(());
        }
        let mut spilled = Column::spilled_zeroed(values.len(), dir)?;
        spilled.copy_from_slice(values);
        spilled.release();
        *self = spilled;
        Ok(())
    }

    /// Hands a spilled column's pages back to the kernel: they leave this process's resident set
    /// and stay in the page cache (a written one is written back first), so the next read
    /// finds the same values, from memory while the machine has it to spare and from the file
    /// when not. The analysis calls this as it moves from one statistic to the next, as the
    /// journal's map is handed back behind the reader. Nothing happens to a heap column, nor
    /// on systems without the call (they page a mapped file on their own).
    pub fn release(&self) {
        #[cfg(unix)]
        if let Data::Spilled(spill) = &self.data {
            // SAFETY: MADV_DONTNEED on a shared file mapping only drops this process's page-table
            // entries; a written page is kept, dirty, in the page cache and written back, and a
            // later access maps the same bytes again. No reference into the map sees a change.
            #[allow(unsafe_code)]
            let _ = unsafe {
                spill
                    .map
                    .unchecked_advise(memmap2::UncheckedAdvice::DontNeed)
            };
        }
    }

    /// Whether the values live in a spill file.
    pub fn is_spilled(&self) -> bool {
        matches!(self.data, Data::Spilled(_))
    }

    /// The values as a `Vec`: moved from the heap, copied from a spill file.
    pub fn into_vec(self) -> Vec<T> {
        match self.data {
            Data::Heap(values) => values,
            Data::Spilled(_) => self.to_vec(),
        }
    }

    fn spilled_zeroed(len: usize, dir: &Path) -> Result<Column<T>, SpillError> {
        if len == 0 {
            return Ok(Column::default());
        }
        let error = |source| SpillError {
            dir: dir.to_path_buf(),
            source,
        };
        let bytes = len.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
            error(std::io::Error::other(
                "the column is larger than memory can address",
            ))
        })?;
        let (file, path) = spill_file(dir).map_err(error)?;
        // A sparse file of zeros: no disk is used until a page is written.
        file.set_len(bytes as u64).map_err(error)?;
        // SAFETY: the file was created here with `create_new` under a name unique to this
        // process and column, and (on Unix) unlinked before this line, so no other process or
        // mapping can change it while it is mapped; its length is fixed above and never changed.
        #[allow(unsafe_code)]
        let map = unsafe { MmapMut::map_mut(&file) }.map_err(error)?;
        Ok(Column {
            data: Data::Spilled(Spill { map, len, path }),
        })
    }
}

/// A new, empty file in `dir` no other file or process shares, and its path where it keeps one.
fn spill_file(dir: &Path) -> std::io::Result<(File, Option<PathBuf>)> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let path = dir.join(format!(
        ".percentes-spill-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    if cfg!(unix) {
        // An open file outlives its name on Unix: the spill is gone when the map is.
        std::fs::remove_file(&path)?;
        Ok((file, None))
    } else {
        Ok((file, Some(path)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spill_dir() -> percentes_testkit::Scratch {
        percentes_testkit::Scratch::new("column")
    }

    #[test]
    fn a_spilled_column_reads_and_writes_as_the_heap_one_and_leaves_no_file() {
        let dir = spill_dir();
        let values: Vec<u64> = (0..100_000u64).map(|i| i * 7 + u64::MAX / 3).collect();
        let mut heap: Column<u64> = values.clone().into();
        let mut spilled: Column<u64> = values.into();
        spilled.spill(&dir).unwrap();
        assert!(spilled.is_spilled() && !heap.is_spilled());
        assert_eq!(&heap[..], &spilled[..]);
        heap[77_777] = 1;
        spilled[77_777] = 1;
        assert_eq!(&heap[..], &spilled[..]);
        // Pages handed back, one of them written since, read back the same.
        spilled.release();
        assert_eq!(&heap[..], &spilled[..]);
        spilled[3] = 5;
        heap[3] = 5;
        spilled.release();
        assert_eq!(&heap[..], &spilled[..]);
        let filled = Column::filled(5_000, u64::MAX, &Place::Spilled(dir.to_path_buf())).unwrap();
        assert!(filled.iter().all(|&v| v == u64::MAX) && filled.len() == 5_000);
        let zeros = Column::filled(3, 0u16, &Place::Spilled(dir.to_path_buf())).unwrap();
        assert_eq!(&zeros[..], &[0, 0, 0]);
        assert_eq!(spilled.into_vec(), heap.into_vec());
        drop((filled, zeros));
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert!(left.is_empty(), "spill files left behind: {left:?}");
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn an_empty_column_spills_to_nothing_and_a_missing_folder_is_named() {
        let mut empty: Column<u32> = Vec::new().into();
        empty
            .spill(Path::new("/nonexistent-percentes-dir"))
            .unwrap();
        assert!(!empty.is_spilled());
        let mut one: Column<u32> = vec![1].into();
        let error = one
            .spill(Path::new("/nonexistent-percentes-dir"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("/nonexistent-percentes-dir"), "{error}");
        assert!(error.contains("--spill-dir"), "{error}");
        assert_eq!(&one[..], &[1], "a failed spill keeps the values");
    }
}
