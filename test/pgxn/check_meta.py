#!/usr/bin/env python3
"""Check META.json against the PGXN Meta Spec v1.0.0 (https://pgxn.org/spec/).

Without arguments: the required keys and the types and formats of every
key streamwm uses, written out from the spec.  With --schema DIR: also
validate with the spec's JSON Schema files (schema/v1/*.schema.json of
github.com/pgxn/meta) through the jsonschema module.  Also checks that
the version agrees with streamwm.control and that the files named exist
(before the release's version bump and script rename are merged, give
--before-bump to accept a missing script and another default_version).
"""
import json
import os
import re
import sys

SEMVER = re.compile(r'^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)'
                    r'(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$')
TERM = re.compile(r'^[^/\\\s\x00-\x1f\x7f]{2,}$')
TAG = re.compile(r'^[^/\\\x00-\x1f\x7f]{2,255}$')
LICENSES = {'agpl_3', 'apache_1_1', 'apache_2_0', 'artistic_1', 'artistic_2', 'bsd',
            'freebsd', 'gfdl_1_2', 'gfdl_1_3', 'gpl_1', 'gpl_2', 'gpl_3', 'lgpl_2_1',
            'lgpl_3_0', 'mit', 'mozilla_1_0', 'mozilla_1_1', 'openssl', 'perl_5',
            'postgresql', 'qpl_1_0', 'ssleay', 'sun', 'zlib', 'open_source',
            'restricted', 'unrestricted', 'unknown'}
KEYS = {'name', 'version', 'abstract', 'maintainer', 'license', 'provides', 'meta-spec',
        'description', 'generated_by', 'tags', 'no_index', 'prereqs', 'release_status',
        'resources'}
REQUIRED = ['name', 'version', 'abstract', 'maintainer', 'license', 'provides', 'meta-spec']


def check(meta, root, before_bump):
    errors = []

    def err(msg):
        errors.append(msg)

    for k in REQUIRED:
        if k not in meta:
            err('missing required key %r' % k)
    for k in meta:
        if k not in KEYS and not re.match(r'^[xX]_.', k):
            err('unknown key %r' % k)
    if not TERM.match(meta.get('name', '')):
        err('name is not a term')
    if not SEMVER.match(meta.get('version', '')):
        err('version is not SemVer')
    for k in ('abstract', 'description', 'generated_by'):
        if k in meta and (not isinstance(meta[k], str) or not meta[k]):
            err('%s must be a non-empty string' % k)
    m = meta.get('maintainer')
    if not (isinstance(m, str) and m) and not (isinstance(m, list) and m and
                                              all(isinstance(x, str) and x for x in m)):
        err('maintainer must be a string or a non-empty array of strings')
    lic = meta.get('license')
    if isinstance(lic, str):
        if lic not in LICENSES:
            err('unknown license %r' % lic)
    elif isinstance(lic, list):
        if not lic or any(x not in LICENSES for x in lic):
            err('license array has an unknown license')
    elif not (isinstance(lic, dict) and lic):
        err('license must be a string, array or object')
    prov = meta.get('provides')
    if not isinstance(prov, dict) or not prov:
        err('provides must be a non-empty object')
    else:
        for ext, p in prov.items():
            if not TERM.match(ext):
                err('provides: %r is not a term' % ext)
            for k in p:
                if k not in ('file', 'version', 'abstract', 'docfile', 'docpath'):
                    err('provides.%s: unknown key %r' % (ext, k))
            for k in ('file', 'version'):
                if k not in p:
                    err('provides.%s: missing %r' % (ext, k))
            if not SEMVER.match(p.get('version', '')):
                err('provides.%s.version is not SemVer' % ext)
            for k in ('file', 'docfile'):
                if k in p and not os.path.exists(os.path.join(root, p[k])):
                    if not (k == 'file' and before_bump):
                        err('provides.%s.%s: %s does not exist' % (ext, k, p[k]))
    ms = meta.get('meta-spec', {})
    if ms.get('version') != '1.0.0':
        err('meta-spec.version must be 1.0.0')
    if 'url' in ms and not re.match(r'^https?://', ms['url']):
        err('meta-spec.url must be a URI')
    if meta.get('release_status', 'stable') not in ('stable', 'testing', 'unstable'):
        err('release_status must be stable, testing or unstable')
    tags = meta.get('tags', ['ok'])
    if not isinstance(tags, list) or not tags or len(set(tags)) != len(tags) or \
            any(not isinstance(t, str) or not TAG.match(t) for t in tags):
        err('tags must be a non-empty array of unique tags')
    for phase, rels in meta.get('prereqs', {}).items():
        if phase not in ('configure', 'build', 'test', 'runtime', 'develop'):
            err('prereqs: unknown phase %r' % phase)
        for rel, reqs in rels.items():
            if rel not in ('requires', 'recommends', 'suggests', 'conflicts'):
                err('prereqs.%s: unknown relationship %r' % (phase, rel))
            for name, v in reqs.items():
                if not (v == 0 or (isinstance(v, str) and re.match(
                        r'^(?:(?:[=!<>]=?|[<>])\s*)?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)', v))):
                    err('prereqs.%s.%s.%s: not a version range' % (phase, rel, name))
    for k, v in meta.get('resources', {}).items():
        if k not in ('homepage', 'bugtracker', 'repository') and not re.match(r'^[xX]_.', k):
            err('resources: unknown key %r' % k)
    # streamwm's own rule: the distribution's version is the control file's
    control = open(os.path.join(root, 'streamwm.control')).read()
    dv = re.search(r"default_version\s*=\s*'([^']*)'", control).group(1)
    if not before_bump and meta.get('version', '').rsplit('.', 1)[0] != dv and meta.get('version') != dv:
        err('version %s does not match default_version %s of streamwm.control'
            % (meta.get('version'), dv))
    return errors


def check_schema(meta, schema_dir):
    import jsonschema
    from referencing import Registry, Resource
    resources = []
    for f in os.listdir(schema_dir):
        if f.endswith('.schema.json'):
            text = open(os.path.join(schema_dir, f)).read()
            # the spec's patterns use \p{Cntrl} and \p{Space}, which Python's re lacks
            text = (text.replace('\\\\p{Cntrl}', '\\\\x00-\\\\x1f\\\\x7f')
                    .replace('\\\\p{Space}', '\\\\s').replace('[[:digit:]]', '[0-9]'))
            s = json.loads(text)
            resources.append((s['$id'], Resource.from_contents(s)))
    registry = Registry().with_resources(resources)
    schema = registry.contents('https://pgxn.org/meta/v1/distribution.schema.json')
    v = jsonschema.Draft202012Validator(schema, registry=registry)
    return ['schema: %s at %s' % (e.message, '/'.join(map(str, e.path)))
            for e in v.iter_errors(meta)]


def main():
    args = sys.argv[1:]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    meta = json.load(open(os.path.join(root, 'META.json')))
    errors = check(meta, root, '--before-bump' in args)
    if '--schema' in args:
        errors += check_schema(meta, args[args.index('--schema') + 1])
    for e in errors:
        print('META.json: ' + e)
    print('META.json: %s' % ('valid' if not errors else '%d error(s)' % len(errors)))
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
