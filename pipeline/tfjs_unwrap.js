// Unwrap a TensorFlow.js layers model shipped as UMD bundles (nsfwjs's dist/models/M/:
// model.min.js exports {modelTopology, weightsManifest}, and each shard P of
// weightsManifest[g].paths is P.min.js exporting the shard's bytes in base64) into the
// standard layers format: OUT/model.json and OUT/P, the binary shards.
// Usage: node pipeline/tfjs_unwrap.js SRC OUT   (OUT must not exist; no npm dependencies)
// Prints "W weights, B bytes in S shards" on stdout; any failure is one line on stderr
// and exit status 1.
'use strict';
const fs = require('fs');
const path = require('path');

// Bytes per element of the dtype a weight is stored in (quantization.dtype if quantized).
const STORED_SIZE = {float32: 4, int32: 4, bool: 1, uint8: 1, uint16: 2, float16: 2};

function storedBytes(w) {
    const dtype = w.quantization ? w.quantization.dtype : w.dtype;
    const size = STORED_SIZE[dtype];
    if (!size) throw new Error(`weight ${w.name}: unsupported stored dtype ${dtype}`);
    return w.shape.reduce((n, d) => n * d, 1) * size;
}

function unwrap(src, out) {
    const bundle = require(path.resolve(src, 'model.min.js'));
    if (!bundle || !bundle.modelTopology || !Array.isArray(bundle.weightsManifest))
        throw new Error(`${src}/model.min.js does not export {modelTopology, weightsManifest}`);
    fs.mkdirSync(out);
    let nweights = 0, nbytes = 0, nshards = 0;
    for (const group of bundle.weightsManifest) {
        // tfjs reads a group's shards as one concatenated buffer, so sizes add up per group.
        const expected = group.weights.reduce((n, w) => n + storedBytes(w), 0);
        let got = 0;
        for (const p of group.paths) {
            const b64 = require(path.resolve(src, p + '.min.js'));
            if (typeof b64 !== 'string') throw new Error(`${src}/${p}.min.js does not export a base64 string`);
            const bytes = Buffer.from(b64, 'base64');
            fs.writeFileSync(path.join(out, p), bytes);
            got += bytes.length;
        }
        if (got !== expected)
            throw new Error(`${src}: shards ${group.paths.join(',')} hold ${got} bytes, ` +
                            `their ${group.weights.length} weights need ${expected}`);
        nweights += group.weights.length;
        nbytes += got;
        nshards += group.paths.length;
    }
    fs.writeFileSync(path.join(out, 'model.json'),
                     JSON.stringify({modelTopology: bundle.modelTopology, weightsManifest: bundle.weightsManifest}));
    return `${nweights} weights, ${nbytes} bytes in ${nshards} shard${nshards === 1 ? '' : 's'}`;
}

if (process.argv.length !== 4) {
    console.error('usage: node pipeline/tfjs_unwrap.js SRC OUT');
    process.exit(1);
}
try {
    console.log(unwrap(process.argv[2], process.argv[3]));
} catch (e) {
    console.error(`tfjs_unwrap: ${e.message.split('\n')[0]}`); // require()'s message goes on with its stack
    process.exit(1);
}
