package sandboxio

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"
)

// Limits of a walk and of find (the docs' files rows).
const (
	// MaxWalk bounds the entries a walk visits.
	MaxWalk = 1000000
	// MaxFindMatches bounds the lines Find returns, and MaxFindLine
	// each line's characters.
	MaxFindMatches = 1000
	MaxFindLine    = 500
)

// Match is a line Find found: its file, its number from 1, and its text
// cut at MaxFindLine characters.
type Match struct {
	File    string
	Line    int
	Content string
}

// Walk visits everything under root (not root itself), folders
// before their contents, without following symlinks, until fn returns
// false, MaxWalk entries were seen or ctx ends. Folders are read several
// at once. onErr (may be nil) hears of folders that could not be read.
// It reports whether it stopped early.
func (c *Files) Walk(ctx context.Context, root string, fn func(p string, fi os.FileInfo) bool, onErr func(p string, err error)) bool {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type listing struct {
		dir  string
		list []os.FileInfo
		err  error
	}
	const readers = 8
	var (
		pending = []string{root}
		results = make(chan listing)
		running = 0
		seen    = 0
		stopped = false
	)
	read := func(dir string) {
		list, err := c.ReadDirContext(ctx, dir)
		sort.Slice(list, func(i, j int) bool { return list[i].Name() < list[j].Name() })
		select {
		case results <- listing{dir, list, err}:
		case <-ctx.Done():
		}
	}
	for len(pending) > 0 || running > 0 {
		for !stopped && running < readers && len(pending) > 0 {
			dir := pending[0]
			pending = pending[1:]
			running++
			go read(dir)
		}
		if running == 0 {
			break
		}
		var l listing
		select {
		case l = <-results:
		case <-ctx.Done():
			return true
		}
		running--
		if stopped {
			continue
		}
		if l.err != nil {
			if onErr != nil {
				onErr(l.dir, l.err)
			}
			continue
		}
		for _, fi := range l.list {
			p := path.Join(l.dir, fi.Name())
			if seen++; seen > MaxWalk || !fn(p, fi) {
				stopped = true
				cancel()
				break
			}
			if fi.IsDir() {
				pending = append(pending, p)
			}
		}
	}
	return stopped
}

// Find reads files several at once and gives their matches in order,
// up to MaxFindMatches; more reports that there were more.
func (c *Files) Find(ctx context.Context, files []string, match func([]byte) bool) (matches []Match, more bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	const readers = 8
	slots := make([]chan []Match, len(files))
	for i := range slots {
		slots[i] = make(chan []Match, 1)
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(readers, len(files)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				slots[i] <- c.findInFile(ctx, files[i], match)
			}
		}()
	}
	go func() {
		defer close(next)
		for i := range files {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	matches = []Match{}
	for i := range files {
		var m []Match
		select {
		case m = <-slots[i]:
		case <-ctx.Done():
			return matches, false
		}
		if len(matches)+len(m) > MaxFindMatches {
			matches = append(matches, m[:MaxFindMatches-len(matches)]...)
			more = true
			break
		}
		matches = append(matches, m...)
	}
	cancel()
	wg.Wait()
	return matches, more
}

// findInFile returns up to MaxFindMatches+1 matching lines of one file;
// nil for a binary file or one that cannot be read.
func (c *Files) findInFile(ctx context.Context, p string, match func([]byte) bool) []Match {
	if ctx.Err() != nil {
		return nil
	}
	f, err := c.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(8 << 10)
	if bytes.IndexByte(head, 0) >= 0 {
		return nil
	}
	var out []Match
	var long []byte
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: keep its first 1 MiB, skip the rest.
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				if len(long) < 1<<20 {
					long = append(long, line[:min(len(line), 1<<20-len(long))]...)
				}
			}
			line = long
		}
		if len(line) > 0 {
			text := bytes.TrimSuffix(line, []byte("\n"))
			if match(text) {
				out = append(out, Match{File: p, Line: n, Content: cutLine(text)})
				if len(out) > MaxFindMatches {
					return out
				}
			}
		}
		if err != nil || ctx.Err() != nil {
			return out
		}
	}
}

// cutLine is a line as valid UTF-8 of at most MaxFindLine characters.
func cutLine(b []byte) string {
	s := strings.ToValidUTF8(string(b[:min(len(b), MaxFindLine*utf8.UTFMax)]), "\uFFFD")
	if utf8.RuneCountInString(s) <= MaxFindLine {
		return s
	}
	i, n := 0, 0
	for i = range s {
		if n == MaxFindLine {
			break
		}
		n++
	}
	return s[:i]
}
