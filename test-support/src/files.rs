//! The files of one folder served over HTTP on 127.0.0.1, as a release location is (the
//! action's install step downloads `<base>/<file>`): GET of a plain file name answers it, any
//! other path 404. Records the paths asked for, so a test can tell what was downloaded.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// A server running on a thread for as long as the process does (the listener is never closed:
/// tests and the bench end soon after).
pub struct FileServer {
    /// `http://127.0.0.1:PORT/release`: the files are `<base>/<name>`.
    pub base: String,
    asked: Arc<Mutex<Vec<String>>>,
}

impl FileServer {
    /// Serves the files of `dir` (read when asked for, so they may change meanwhile).
    pub fn serve(dir: &Path) -> std::io::Result<FileServer> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let base = format!("http://{}/release", listener.local_addr()?);
        let asked = Arc::new(Mutex::new(Vec::new()));
        let (dir, log) = (dir.to_path_buf(), asked.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                // One request per connection; a client that sends nothing useful gets a 404.
                let _ = answer(stream, &dir, &log);
            }
        });
        Ok(FileServer { base, asked })
    }

    /// The paths asked for so far, in order (`/release/<name>`).
    pub fn asked(&self) -> Vec<String> {
        self.asked.lock().expect("request log").clone()
    }
}

fn answer(
    mut stream: std::net::TcpStream,
    dir: &Path,
    log: &Mutex<Vec<String>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    let mut line = String::new();
    // The headers, up to the empty line.
    while reader.read_line(&mut line)? > 2 {
        line.clear();
    }
    let mut words = request.split(' ');
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    log.lock().expect("request log").push(path.to_owned());
    let file = path
        .strip_prefix("/release/")
        .filter(|name| method == "GET" && !name.contains('/') && !name.starts_with('.'))
        .and_then(|name| std::fs::read(dir.join(name)).ok());
    let (status, body) = match file {
        Some(body) => ("200 OK", body),
        None => ("404 Not Found", b"not here\n".to_vec()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(&body)
}
