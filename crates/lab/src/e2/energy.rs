//! The DTLS client's energy as seed 002 measured it: radio AND microcontroller (Contiki's
//! Energest on a WiSMote at 2.8 V). The simulator books the radio (CC2520, `sim::radio`); this
//! adds the MSP430's share.
//!
//! Currents, MSP430F5437 (the WiSMote's MCU, 12 MHz in seed 002), from TI's datasheet SLAS612F
//! ("MSP430F543x, MSP430F541x", Aug. 2009 – Sep. 2018), active mode supply current, program in
//! flash, 3.0 V, PMMCOREVx = 2: 2.50 mA at 8 MHz and 5.00 mA at 16 MHz (typical), so 3.75 mA at
//! 12 MHz (the current grows linearly with the clock); standby LPM3 with the RTC running,
//! 2.6 µA (typical). Both taken at the paper's 2.8 V supply.
//!
//! When the MCU is active: Contiki's radio drivers and X-MAC keep the CPU busy while the radio
//! is on (strobing, waiting for the early ack, reading the frame over SPI), so the MCU is counted
//! active for the client's whole radio-on time and in LPM3 otherwise. The time tinyDTLS spends
//! computing (SHA-256 PRF, AES-CCM in software on the MSP430) is NOT modelled; the report gives
//! the CPU time that would account for any remaining gap to the paper instead of guessing it.

use serde::Serialize;

/// MSP430F5437 active at 12 MHz, mA (SLAS612F, interpolated between 8 and 16 MHz).
pub const MCU_ACTIVE_MA: f64 = 3.75;
/// MSP430F5437 in LPM3, mA (SLAS612F).
pub const MCU_LPM3_MA: f64 = 0.0026;
/// WiSMote supply in seed 002.
pub const SUPPLY_V: f64 = 2.8;

/// The MCU's energy over a handshake of `duration_s` in which the radio was on `radio_on_s`, mJ.
pub fn mcu_mj(duration_s: f64, radio_on_s: f64) -> f64 {
    let active = radio_on_s.min(duration_s);
    SUPPLY_V * (MCU_ACTIVE_MA * active + MCU_LPM3_MA * (duration_s - active).max(0.0))
}

/// Seconds of computation at [`MCU_ACTIVE_MA`] that `missing_mj` stands for.
pub fn cpu_seconds_for(missing_mj: f64) -> f64 {
    missing_mj / (SUPPLY_V * MCU_ACTIVE_MA)
}

/// One handshake's client energy, split as the paper's Energest figure would be.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct ClientEnergy {
    /// CC2520, simulated (tx, rx, idle listening, sleep).
    pub radio_mj: f64,
    /// MSP430, active while the radio is on, LPM3 otherwise (crypto time not included).
    pub mcu_mj: f64,
}

impl ClientEnergy {
    pub fn new(radio_mj: f64, radio_on_s: f64, duration_s: f64) -> Self {
        ClientEnergy { radio_mj, mcu_mj: mcu_mj(duration_s, radio_on_s) }
    }

    /// Radio and MCU: what the paper's figures cover (less the crypto time).
    pub fn total_mj(&self) -> f64 {
        self.radio_mj + self.mcu_mj
    }
}
