//! Entry point of the kvscope web app: mounts [`kvscope_web::App`] on `<body>`.
fn main() {
    kvscope_web::start();
}
