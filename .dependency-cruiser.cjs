/**
 * The import rules of docs/ARCHITECTURE.md, checked by `npm test` (npm run lint:deps):
 * - nothing under src/ imports channels/ (channels are handed in through their descriptors);
 * - channels/ import only src/contracts and src/util (the platform-neutral helpers);
 * - a stage imports only itself, src/contracts and the stages below it;
 * - no import cycles.
 * Type-only imports count: a type that points upwards is a dependency that points upwards.
 */
// Lowest first. A stage may import the stages on earlier lines, never later ones.
const layers = [
  ['contracts'],
  ['util'],
  ['kernel'],
  ['observe'],
  ['config'],
  ['inbox'],
  ['store'],
  ['agent', 'stream', 'supervisor'],
  ['runtime'],
  ['mcp', 'memory'],
  ['dispatch'],
  ['tools'],
  ['cluster'],
  ['topology'],
  ['actions'],
  ['media'],
  ['workspace'],
  ['daemon'],
  ['cli'],
];

const upward = layers.flatMap((stages, level) => {
  const above = layers.slice(level + 1).flat();
  const sameLevelOthers = (s) => stages.filter((x) => x !== s);
  return stages.map((stage) => {
    const forbidden = [...above, ...sameLevelOthers(stage)];
    return {
      name: `no-upward-from-${stage}`,
      comment: `src/${stage} may import only src/contracts and stages below it (${layers.slice(0, level).flat().join(', ') || 'none'})`,
      severity: 'error',
      from: { path: `^src/${stage}/` },
      to: { path: `^src/(${forbidden.join('|')})/` },
    };
  });
}).filter((rule) => !rule.to.path.endsWith('()/'));

module.exports = {
  forbidden: [
    {
      name: 'no-src-to-channels',
      comment: 'src/ never imports a channel kind: kinds reach the core through channels/registry.ts and the entry point',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^channels/' },
    },
    {
      name: 'channels-use-contracts-and-util',
      comment: 'a channel kind imports only src/contracts and src/util, so stages can change behind it',
      severity: 'error',
      from: { path: '^channels/' },
      to: { path: '^src/', pathNot: '^src/(contracts|util)/' },
    },
    {
      name: 'no-circular',
      comment: 'an import cycle makes load order matter and layers meaningless',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    ...upward,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(node_modules|dist)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'], extensions: ['.ts', '.js', '.mjs'] },
    moduleSystems: ['es6'],
  },
};
