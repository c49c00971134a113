//! COM1 (the serial line qemu shows on stdio) and qemu's isa-debug-exit port.

use core::arch::asm;
use core::fmt;

const COM1: u16 = 0x3F8;

fn outb(port: u16, v: u8) {
    // SAFETY: port I/O to the UART and the debug-exit device; no memory is touched.
    unsafe { asm!("out dx, al", in("dx") port, in("al") v, options(nomem, nostack, preserves_flags)) }
}

fn inb(port: u16) -> u8 {
    let v: u8;
    // SAFETY: as in `outb`.
    unsafe { asm!("in al, dx", in("dx") port, out("al") v, options(nomem, nostack, preserves_flags)) }
    v
}

/// 115200 8N1, no interrupts.
pub fn init() {
    outb(COM1 + 1, 0x00);
    outb(COM1 + 3, 0x80);
    outb(COM1, 0x01);
    outb(COM1 + 1, 0x00);
    outb(COM1 + 3, 0x03);
    outb(COM1 + 2, 0xC7);
    outb(COM1 + 4, 0x0B);
}

fn put(b: u8) {
    while inb(COM1 + 5) & 0x20 == 0 {}
    outb(COM1, b);
}

/// `write!` target for the serial line.
pub struct Serial;

impl fmt::Write for Serial {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        s.bytes().for_each(put);
        Ok(())
    }
}

/// End qemu with exit status `code * 2 + 1` (isa-debug-exit at 0xf4).
pub fn exit(code: u8) -> ! {
    outb(0xF4, code);
    loop {
        // SAFETY: halting with interrupts off ends this CPU's work; nothing follows.
        unsafe { asm!("cli; hlt", options(nomem, nostack)) }
    }
}
