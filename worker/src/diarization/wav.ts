import { readFile } from 'node:fs/promises';

/**
 * Reads a WAV file into Float32 samples in [-1, 1]: integer PCM (8, 16, 24 or 32 bit) or IEEE float
 * (32 or 64 bit), plain or WAVE_FORMAT_EXTENSIBLE, any chunk layout. Several channels are averaged
 * to one. The whole file is read at once: a 1 h 16 kHz 16-bit recording is 115 MB on disk and
 * 230 MB as Float32.
 */
export async function readWav(file: string): Promise<{ samples: Float32Array; sampleRate: number }> {
  const buf = await readFile(file);
  if (buf.length < 12 || buf.toString('ascii', 0, 4) !== 'RIFF' || buf.toString('ascii', 8, 12) !== 'WAVE') {
    throw new Error(`${file} is not a WAV file`);
  }
  let pos = 12;
  let fmt: Buffer | null = null;
  while (pos + 8 <= buf.length) {
    const id = buf.toString('ascii', pos, pos + 4);
    const len = buf.readUInt32LE(pos + 4);
    if (id === 'fmt ') {
      fmt = buf.subarray(pos + 8, Math.min(buf.length, pos + 8 + len));
    } else if (id === 'data') {
      if (!fmt || fmt.length < 16) throw new Error(`${file}: WAV data chunk before its fmt chunk`);
      // A length of 0xffffffff (or past the end) is what streaming writers leave: use what is there.
      const data = buf.subarray(pos + 8, Math.min(buf.length, pos + 8 + len));
      return decode(file, fmt, data);
    }
    pos += 8 + len + (len % 2);
  }
  throw new Error(`${file}: WAV file has no data chunk`);
}

function decode(file: string, fmt: Buffer, data: Buffer): { samples: Float32Array; sampleRate: number } {
  let format = fmt.readUInt16LE(0);
  const channels = fmt.readUInt16LE(2);
  const sampleRate = fmt.readUInt32LE(4);
  const bits = fmt.readUInt16LE(14);
  // WAVE_FORMAT_EXTENSIBLE: the real format is the first two bytes of the sub-format GUID.
  if (format === 0xfffe && fmt.length >= 26) format = fmt.readUInt16LE(24);
  if (channels < 1 || sampleRate < 1) throw new Error(`${file}: WAV header has ${channels} channels at ${sampleRate} Hz`);
  const bytes = bits / 8;
  let read: (offset: number) => number;
  if (format === 1 && bits === 16) read = (o) => data.readInt16LE(o) / 32768;
  else if (format === 1 && bits === 24) read = (o) => data.readIntLE(o, 3) / 8388608;
  else if (format === 1 && bits === 32) read = (o) => data.readInt32LE(o) / 2147483648;
  else if (format === 1 && bits === 8) read = (o) => (data.readUInt8(o) - 128) / 128;
  else if (format === 3 && bits === 32) read = (o) => data.readFloatLE(o);
  else if (format === 3 && bits === 64) read = (o) => data.readDoubleLE(o);
  else throw new Error(`${file}: unsupported WAV encoding (format ${format}, ${bits}-bit)`);
  const frameBytes = bytes * channels;
  const n = Math.floor(data.length / frameBytes);
  const samples = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    let sum = 0;
    for (let c = 0; c < channels; c++) sum += read(i * frameBytes + c * bytes);
    samples[i] = sum / channels;
  }
  return { samples, sampleRate };
}
