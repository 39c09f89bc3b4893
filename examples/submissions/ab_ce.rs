// A+B in Rust that does not borrow-check: CE with rustc's message.
fn main() {
    let mut line = String::new();
    let first = &mut line;
    let second = &mut line;
    first.push('1');
    second.push('2');
}
