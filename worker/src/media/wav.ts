import { open } from 'node:fs/promises';

export interface WavInfo {
  /** 1 = integer PCM, 3 = float, 0xfffe = extensible (sub-format not inspected). */
  audioFormat: number;
  channels: number;
  sampleRate: number;
  bitsPerSample: number;
  /** Byte offset of the first sample. */
  dataOffset: number;
  dataBytes: number;
  durationSeconds: number;
}

/** Reads a RIFF/WAVE header (any chunk layout) without loading the samples. */
export async function readWavInfo(file: string): Promise<WavInfo> {
  const fh = await open(file, 'r');
  try {
    const { size } = await fh.stat();
    const read = async (pos: number, len: number) => {
      const buf = Buffer.alloc(len);
      const { bytesRead } = await fh.read(buf, 0, len, pos);
      return buf.subarray(0, bytesRead);
    };
    const head = await read(0, 12);
    if (head.length < 12 || head.toString('ascii', 0, 4) !== 'RIFF' || head.toString('ascii', 8, 12) !== 'WAVE') {
      throw new Error(`${file} is not a WAV file`);
    }
    let pos = 12;
    let fmt: Buffer | null = null;
    while (pos + 8 <= size) {
      const hdr = await read(pos, 8);
      if (hdr.length < 8) break;
      const id = hdr.toString('ascii', 0, 4);
      const len = hdr.readUInt32LE(4);
      if (id === 'fmt ') {
        fmt = await read(pos + 8, Math.min(len, 64));
      } else if (id === 'data') {
        if (!fmt || fmt.length < 16) throw new Error(`${file}: WAV data chunk before its fmt chunk`);
        const audioFormat = fmt.readUInt16LE(0);
        const channels = fmt.readUInt16LE(2);
        const sampleRate = fmt.readUInt32LE(4);
        const bitsPerSample = fmt.readUInt16LE(14);
        const dataOffset = pos + 8;
        // 0xffffffff (or a size past the end) is what streaming writers leave: use what is there.
        const dataBytes = Math.min(len, size - dataOffset);
        const bytesPerSecond = sampleRate * channels * (bitsPerSample / 8);
        return {
          audioFormat,
          channels,
          sampleRate,
          bitsPerSample,
          dataOffset,
          dataBytes,
          durationSeconds: bytesPerSecond > 0 ? dataBytes / bytesPerSecond : 0,
        };
      }
      pos += 8 + len + (len % 2);
    }
    throw new Error(`${file}: WAV file has no data chunk`);
  } finally {
    await fh.close();
  }
}

/** The format every engine here reads: 16 kHz, mono, 16-bit integer PCM. */
export async function assertSpeechWav(file: string): Promise<WavInfo> {
  const info = await readWavInfo(file);
  if ((info.audioFormat !== 1 && info.audioFormat !== 0xfffe) || info.sampleRate !== 16000 || info.channels !== 1 || info.bitsPerSample !== 16) {
    throw new Error(
      `${file}: expected 16 kHz mono 16-bit PCM WAV, got ${info.sampleRate} Hz, ${info.channels} channel(s), ${info.bitsPerSample}-bit (format ${info.audioFormat}); decode it with decodeToWav first`,
    );
  }
  return info;
}

/** A plain 44-byte RIFF/WAVE header for integer PCM data of `dataBytes` bytes. */
export function canonicalWavHeader(dataBytes: number, sampleRate = 16000, channels = 1, bitsPerSample = 16): Buffer {
  const h = Buffer.alloc(44);
  const blockAlign = channels * (bitsPerSample / 8);
  h.write('RIFF', 0, 'ascii');
  h.writeUInt32LE(36 + dataBytes, 4);
  h.write('WAVE', 8, 'ascii');
  h.write('fmt ', 12, 'ascii');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(channels, 22);
  h.writeUInt32LE(sampleRate, 24);
  h.writeUInt32LE(sampleRate * blockAlign, 28);
  h.writeUInt16LE(blockAlign, 32);
  h.writeUInt16LE(bitsPerSample, 34);
  h.write('data', 36, 'ascii');
  h.writeUInt32LE(dataBytes, 40);
  return h;
}
